/*
 * execserver/protocol.h - names and numbers of the execserver broker
 * protocol, shared by the daemon and by clients.  docs/protocol.md is the
 * contract; this header only spells its constants so that no side types a
 * string twice.
 */
#ifndef EXECSERVER_PROTOCOL_H
#define EXECSERVER_PROTOCOL_H

/* Versions: a client names the newest it speaks in the upgrade URL
 * (?protocol=N, absent: 1); HELLO.protocol answers the one in effect, the
 * smaller of that and PROTO_VERSION.  From PROTO_VERSION_ACK on, the client
 * acknowledges each DONE with ACK and the execserver keeps the receipt
 * until then (docs/protocol.md section 6, "Receipts").  From
 * PROTO_VERSION_PROGRESS on, the execserver also sends PROGRESS of running
 * jobs (docs/protocol.md section 2, PROGRESS). */
#define PROTO_VERSION 3
#define PROTO_VERSION_ACK 2
#define PROTO_VERSION_PROGRESS 3
#define PROTO_PARAM_PROTOCOL "protocol"
#define PROTO_BROKER_PATH "/broker"

/* Message types (the "type" field). */
#define PROTO_HELLO "HELLO"
#define PROTO_WANT "WANT"
#define PROTO_UNWANT "UNWANT"
#define PROTO_OFFER "OFFER"
#define PROTO_JOB "JOB"
#define PROTO_DECLINE "DECLINE"
#define PROTO_DONE "DONE"
#define PROTO_QUERY "QUERY"
#define PROTO_POSITION "POSITION"
#define PROTO_CANCEL "CANCEL"
#define PROTO_ERROR "ERROR"
#define PROTO_ACK "ACK"           /* protocol 2: a DONE was received */
#define PROTO_PROGRESS "PROGRESS" /* protocol 3: how far a running job is */

/* ERROR codes (the "code" field of ERROR). */
#define PROTO_E_BAD_JSON "bad_json"         /* not JSON, or not an object */
#define PROTO_E_BAD_MESSAGE "bad_message"   /* a field missing or of the wrong type/range */
#define PROTO_E_UNKNOWN_TYPE "unknown_type" /* "type" names no client message */
#define PROTO_E_UNKNOWN_SERVICE "unknown_service"
#define PROTO_E_SERVICE_DISABLED "service_disabled" /* its startup check failed */
#define PROTO_E_DUPLICATE_JOB "duplicate_job"       /* job_id already in use by this client */
#define PROTO_E_UNKNOWN_JOB "unknown_job"           /* no such job_id for this client */
#define PROTO_E_NOT_OFFERED "not_offered"           /* JOB/DECLINE/UNWANT in the wrong state */
#define PROTO_E_BAD_TOKEN "bad_token"               /* token does not match the current offer */
#define PROTO_E_OFFER_EXPIRED "offer_expired" /* the offer was withdrawn after offerTimeoutSec */
#define PROTO_E_LIMIT_REACHED \
	"limit_reached"             /* maxWants / maxWantsPerConnection / maxJobsPerClient */
#define PROTO_E_DRAINING "draining" /* the instance is stopping */
#define PROTO_E_BAD_JOB "bad_job"   /* the job description is invalid */
#define PROTO_E_UNKNOWN_COMMAND "unknown_command" /* command not configured for the service */
#define PROTO_E_INTERNAL "internal"               /* the execserver could not do it; retry */

/* Websocket close codes used by the execserver. */
#define PROTO_CLOSE_NORMAL 1000         /* idleTimeoutSec ran out */
#define PROTO_CLOSE_GOING_AWAY 1001     /* instance stopping, or the peer went silent */
#define PROTO_CLOSE_PROTOCOL_ERROR 1002 /* malformed frame (unmasked, bad opcode, ...) */
#define PROTO_CLOSE_UNSUPPORTED 1003    /* binary message */
#define PROTO_CLOSE_INVALID_UTF8 1007
#define PROTO_CLOSE_POLICY 1008
#define PROTO_CLOSE_TOO_BIG 1009 /* message larger than maxFrameBytes */
#define PROTO_CLOSE_INTERNAL 1011

/* The legacy token transport (docs/protocol.md section 9): GET
 * /token/{service}, then PUT /job/{service}?token=..&job=..; the outcome
 * in header or trailer fields. */
#define PROTO_LEGACY_TOKEN_PREFIX "/token/"
#define PROTO_LEGACY_JOB_PREFIX "/job/"
#define PROTO_LEGACY_TOKEN_HEX 32 /* hex digits of a token */
#define PROTO_LEGACY_EXIT_CODE "X-Execserver-Exit-Code"
#define PROTO_LEGACY_RECEIPT "X-Execserver-Receipt"    /* the receipt JSON, no stdout */
#define PROTO_LEGACY_BUSY "All workers busy"           /* 503 body of GET /token */
#define PROTO_LEGACY_TOKEN_NOT_FOUND "Token not found" /* 403 body of PUT /job */

#endif
