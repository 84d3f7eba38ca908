/*
 * fuzz_json.c - libFuzzer's start-up hook for the targets that parse JSON
 * (fuzz_messages, fuzz_job_spec).
 *
 * json-c seeds its string hash from getrandom, and libFuzzer records the
 * strcmp calls of json-c's lookups to mutate with: with a random hash seed
 * a seeded run (tests/fuzz/run.sh with FUZZ_RUNS) would learn differently
 * each time.  The fixed hash makes it repeat.  The replay driver never
 * calls this; it runs each input once and needs no repetition.
 */
#include "autoconfig.h"

#include <json-c/json.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	json_global_set_string_hash(JSON_C_STR_HASH_PERLLIKE);
	return 0;
}
