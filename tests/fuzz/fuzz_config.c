/*
 * fuzz_config.c - fuzz target of the YAML configuration loader
 * (config_load_buffer: src/config/config_yaml.c builds the tree,
 * src/config/config.c validates it).  The input is the text of a
 * configuration file.
 *
 * Properties checked, beyond "no crash, no leak, no undefined behaviour":
 *  - every refusal names the place: "fuzz.yml:LINE:COLUMN: message" with
 *    LINE and COLUMN >= 1 and a message after them;
 *  - config_free is harmless on a refused config;
 *  - an accepted config keeps the invariants of config.h: every service
 *    names an existing waitgroup and has commands with a non-empty prog,
 *    every waitgroup has at least one slot, names are unique.
 */
#include "autoconfig.h"

#include <string.h>

#include "config/config.h"
#include "fuzz.h"

#define NAME "fuzz.yml"

static void check_error(const char *text)
{
	const char *p = text;
	char *end;
	long line, column;

	FUZZ_CHECK(strncmp(p, NAME ":", sizeof NAME) == 0);
	p += sizeof NAME;
	line = strtol(p, &end, 10);
	FUZZ_CHECK(end != p && *end == ':' && line >= 1);
	p = end + 1;
	column = strtol(p, &end, 10);
	FUZZ_CHECK(end != p && *end == ':' && column >= 1);
	FUZZ_CHECK(end[1] == ' ' && end[2] != '\0');
}

static void check_config(const struct es_config *c)
{
	for (size_t i = 0; i < c->nwaitgroups; i++) {
		FUZZ_CHECK(c->waitgroups[i].processes >= 1);
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(c->waitgroups[i].name, c->waitgroups[j].name) != 0);
	}
	for (size_t i = 0; i < c->nservices; i++) {
		const struct config_service *s = &c->services[i];

		FUZZ_CHECK(s->wg_index >= 0 && (size_t)s->wg_index < c->nwaitgroups);
		FUZZ_CHECK(strcmp(c->waitgroups[s->wg_index].name, s->waitgroup) == 0);
		FUZZ_CHECK(config_find_service(c, s->name) == s);
		for (size_t k = 0; k < s->ncommands; k++) {
			FUZZ_CHECK(s->commands[k].prog && s->commands[k].prog[0]);
			FUZZ_CHECK(config_find_command(s, s->commands[k].name) == &s->commands[k]);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct es_config cfg;
	struct config_error err;

	memset(&err, 0, sizeof err);
	if (config_load_buffer(NAME, (const char *)data, size, &cfg, &err) != 0) {
		FUZZ_CHECK(memchr(err.text, '\0', sizeof err.text) != NULL);
		check_error(err.text);
		config_free(&cfg);
		return 0;
	}
	check_config(&cfg);
	config_free(&cfg);
	return 0;
}
