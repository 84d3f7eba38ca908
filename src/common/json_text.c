/* json_text.c - see json_text.h. */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/json_text.h"

/* s as json-c prints a string, quoted and escaped (NULL when out of
 * memory); the text lives until the next call. */
static const char *quote(const char *s, size_t *n)
{
	static struct json_object *str;

	if (str ? json_object_set_string(str, s) != 1 : !(str = json_object_new_string(s)))
		return NULL;
	return json_object_to_json_string_length(
		str, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, n);
}

char *json_text_head(const char *type, const char *job_id, size_t extra, size_t *len)
{
	static const char k_type[] = "{\"type\":\"", k_id[] = "\",\"job_id\":";
	const size_t kt = sizeof k_type - 1, ki = sizeof k_id - 1, tn = strlen(type);
	size_t in;
	const char *id = quote(job_id, &in);
	char *out = id ? malloc(kt + tn + ki + in + extra + 1) : NULL;

	if (!out)
		return NULL;
	memcpy(out, k_type, kt);
	memcpy(out + kt, type, tn);
	memcpy(out + kt + tn, k_id, ki);
	memcpy(out + kt + tn + ki, id, in);
	*len = kt + tn + ki + in;
	out[*len] = '\0';
	return out;
}

struct json_object *json_fraction(double fraction)
{
	char num[16];

	if (!(fraction >= 0))
		fraction = 0;
	if (fraction > 1)
		fraction = 1;
	snprintf(num, sizeof num, "%.4f", fraction);
	char *end = num + strlen(num);
	while (end[-1] == '0')
		*--end = '\0';
	if (end[-1] == '.')
		*--end = '\0';
	return json_object_new_double_s(fraction, num);
}
