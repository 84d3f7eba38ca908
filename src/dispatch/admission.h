/*
 * admission.h - the claim share's arithmetic, pure (no database, no
 * client, no clock): how many rows of each service the next exec-bound
 * claim may take, and how many places a reservation (a claim on the wire,
 * or one in limbo after its connection was lost) takes.  dispatcher.c
 * gathers the figures (the shares from libexecclient, the places held
 * from its list of rows) and calls these; tests/unit/test_admission.c
 * holds them to their rules.  Invariant: the places handed out plus those
 * held never exceed the overall share, nor, per service, its own share.
 */
#ifndef ES_DISPATCH_ADMISSION_H
#define ES_DISPATCH_ADMISSION_H

#include <stddef.h>
#include <stdint.h>

/* What the services in order may claim now: share, the overall claim
 * share; held, the places taken in all (rows held and reservations);
 * cap, the most rows of one claim; shares[i] and helds[i], service i's
 * own share and places taken.  lims[i] gets service i's places (min of
 * its own share's rest and what the overall share has left after the
 * services before it), or -1 for a service with share 0 (the "other"
 * class: claimed one at a time, outside the overall share).  *unshared
 * gets the places taken by services of share 0.  Returns the sum of the
 * places handed out. */
unsigned admit_places(unsigned share, unsigned held, unsigned cap, size_t n, const unsigned *shares,
		      const unsigned *helds, int64_t *lims, unsigned *unshared);

/* Whether the claim may also take one row of the "other" class: some
 * execserver is reached (share > 0), no row of that class is held
 * (unshared 0) nor may be claimed by a reservation (other_reserved 0), and
 * its time has come (due: pollMs after the last such claim). */
int admit_other(unsigned share, unsigned unshared, int other_reserved, int due);

/* The places of service (NULL: of every service) in a reservation of
 * total places, k of them named per service (names, lims). */
unsigned admit_reserved(unsigned total, size_t k, const char *const *names, const int64_t *lims,
			const char *service);

/* A finish-and-claim's reservation made to cover the rows it carries: the
 * carried rows (their services: carried[0..ncarried)) hold no place of
 * their own once sent, yet stay held in the table until the statement
 * commits, so the reservation (*total, and per service lims[i] of
 * names[i] where lims[i] >= 0) is raised to at least their number.  A
 * claim of fewer rows than it carries then frees the difference when its
 * answer comes, not when it is sent. */
void admit_cover_carried(unsigned *total, size_t k, const char *const *names, int64_t *lims,
			 size_t ncarried, const char *const *carried);

#endif
