/*
 * schedule.h - `execctl schedule list | add | remove`: execdispatch's
 * periodic jobs (docs/dispatch.md, "Periodic jobs") through the SQL API's
 * schedule() and unschedule() and the table schedule.  `add` checks the
 * spec and the zone with the dispatcher's own parser (common/cron.h)
 * before it sends anything, so a spec the dispatchers would refuse is
 * refused here, with the column.  Exit status: execctl(1) (0; 2 usage or
 * input refused, nothing changed; 111 database unreachable; 115 failed;
 * 122 remove: no such schedule).
 */
#ifndef ES_CLI_SCHEDULE_H
#define ES_CLI_SCHEDULE_H

/* argv[0] is "schedule"; returns the exit status. */
int cli_schedule_main(int argc, char **argv);

#endif
