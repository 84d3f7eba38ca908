/*
 * admission.c - see admission.h.
 */
#include "autoconfig.h"
#include "dispatch/admission.h"

#include <string.h>

unsigned admit_places(unsigned share, unsigned held, unsigned cap, size_t n, const unsigned *shares,
		      const unsigned *helds, int64_t *lims, unsigned *unshared)
{
	unsigned left = share > held ? share - held : 0, total = 0;

	*unshared = 0;
	if (left > cap)
		left = cap;
	for (size_t i = 0; i < n; i++) {
		unsigned lim;
		if (shares[i] == 0) {
			*unshared += helds[i];
			lims[i] = -1;
			continue;
		}
		lim = shares[i] > helds[i] ? shares[i] - helds[i] : 0;
		if (lim > left)
			lim = left;
		left -= lim;
		total += lim;
		lims[i] = lim;
	}
	return total;
}

int admit_other(unsigned share, unsigned unshared, int other_reserved, int due)
{
	return share > 0 && unshared == 0 && !other_reserved && due;
}

void admit_cover_carried(unsigned *total, size_t k, const char *const *names, int64_t *lims,
			 size_t ncarried, const char *const *carried)
{
	if (*total < ncarried)
		*total = (unsigned)ncarried;
	for (size_t i = 0; i < k; i++) {
		int64_t n = 0;
		if (lims[i] < 0)
			continue;
		for (size_t c = 0; c < ncarried; c++)
			if (carried[c] && strcmp(carried[c], names[i]) == 0)
				n++;
		if (lims[i] < n)
			lims[i] = n;
	}
}

unsigned admit_reserved(unsigned total, size_t k, const char *const *names, const int64_t *lims,
			const char *service)
{
	unsigned n = 0;

	if (!service)
		return total;
	for (size_t i = 0; i < k; i++)
		if (strcmp(names[i], service) == 0)
			n += (unsigned)lims[i];
	return n;
}
