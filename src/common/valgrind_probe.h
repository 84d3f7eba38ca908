/*
 * valgrind_probe.h - RUNNING_ON_VALGRIND, 0 where valgrind's header is absent.
 *
 * Code that must act differently under valgrind asks RUNNING_ON_VALGRIND
 * (the spawner: valgrind runs a CLONE_VM child as a fork, so the child's
 * report cannot be left in the spawner's memory and goes through a pipe;
 * test_spawn: it checks that no pipe is made, except under valgrind).  A
 * build without valgrind's development header gets a constant 0, and the
 * same code.
 */
#ifndef ES_COMMON_VALGRIND_PROBE_H
#define ES_COMMON_VALGRIND_PROBE_H

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#endif
