/*
 * slot.pml - a Promela model of a slot's life across processes and
 * connections: the want-book (src/book/), the handlers that take its lock,
 * grant, mail and deliver (src/handler/), the master's tick and the purge of
 * a dead handler (src/master/master.c), the jobs' end (src/job/job.c) and
 * clients that WANT, UNWANT, answer OFFERs, acknowledge DONEs, drop, go
 * silent and reconnect (src/client/, protocol 2 of the receipts branch).
 * model/README.md maps every inline and event below to its C function.
 *
 * Bounded configuration: H handlers, P slots of one waitgroup, conn records
 * 0 and 1 of client 0 (a first connection and a reconnect, on different
 * handlers) and 2 of client 1, J jobs (0 and 1 of client 0, 2 of client 1),
 * at most WANTS WANTs per job, MAXCRASH handler deaths (anywhere: inside a
 * critical section at every marked point, or between events).
 *
 * The book's lock is modelled by atomic sequences: a critical section runs
 * without interleaving, and a crash inside it (CRASH) leaves the book as it
 * was at that point with the lock owner-dead; the next locker repairs
 * (LOCK, book_lock's EOWNERDEAD).  Primary fields are the truth; derived
 * ones (mailboxes, FIFO membership, counters) are rebuilt by repair().
 *
 * Mutations (each must make spin report an error; model/check.sh):
 *   -DMUT_NO_PENDING_FLAG  the mail has no pending flag: take sends every
 *                          OFFERED want's OFFER, repair re-queues them all
 *   -DMUT_DONE_NO_KEEP     DONE counted delivered when sent (protocol 1)
 *   -DMUT_EXPIRE_NO_FREE   an expired offer keeps its slot
 *   -DMUT_REPAIR_NO_MAIL   repair skips re-queueing mail from the flags
 *   -DMUT_ADOPT_KEEPS_OFFERS  protocol 2's adopt leaves the offers on the
 *                          client's older conns (the code before the
 *                          late-job fix)
 * Knobs: WANTS, MAXCRASH, MAXDROP (connections client 0 gives up), UNWANTS
 * and ELSEWHERE (client 0 may UNWANT job 1 or DECLINE its OFFER), S2C/C2S
 * (channel bounds, asserted).  check.sh sets the two configurations it
 * searches.  No timing assumption: a client reconnects at any moment.
 */

#define H 2
#define P 2
#define NC 3
#define J 3
#ifndef WANTS
#define WANTS 1
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef C2S
#define C2S 6
#endif
#ifndef UNWANTS
#define UNWANTS 1   /* client 0 may UNWANT a parked or offered want */
#endif
#ifndef ELSEWHERE
#define ELSEWHERE 1 /* client 0 may DECLINE an OFFER it could take */
#endif
#ifndef MAXDROP
#define MAXDROP 1
#endif
#define NIL 255
#ifndef S2C
#define S2C 8     /* messages in flight to a client: more is a model error */
#endif

/* want states: enum want_state (book.h); BK_WANT_EXPIRED is the separate
 * xst record below */
#define W_FREE 0
#define W_PARKED 1
#define W_OFFERED 2
#define W_RUNNING 3
#define W_FINISHED 4

/* want flags (book_layout.h) */
#define F_OM 1   /* BKW_OFFER_MAIL */
#define F_DM 2   /* BKW_DONE_MAIL */

#define JCLIENT(j) ((j) < 2 -> 0 : 1)
#define CCLIENT(c) ((c) < 2 -> 0 : 1)
#define CHAND(c) ((c) == 0 -> 0 : 1)     /* the handler each conn lands on */

mtype = { HELLO, OFFER, DONE, ERR_EXPIRED, ERR_REFUSED, ERR_UNKNOWN, POS,
	  WANT, UNWANT, JOB, DECLINE, ACK, QUERY };

/* ---- the book: primary (P) ---- */
byte wst[J];             /* (P) state */
byte wfl[J];             /* (P) flags */
byte wconn[J];           /* (P) placing conn, or owner conn of a job; NIL */
byte wrun[J];            /* (P) RUNNING: runner handler */
byte wtok[J];            /* (P) the offer's token (offer number of the job) */
bool xst[J * NC];        /* (P) an EXPIRED record of job j on conn c, XI(j, c):
                          * its OFFER_EXPIRED is pending */
byte cst[NC];            /* (P) conn: 0 never opened, 1 LIVE, 2 closed */
/* ---- the book: derived (D) ---- */
byte wmb[J];             /* (D) mailbox the want is queued in (m_handler) */
bool xq[J * NC];         /* (D) it is queued in its conn's handler's mailbox */
bool wq[J];              /* (D) in its node FIFO (parked, grantable) */
byte noff, nrun;         /* (D) wgs[0].offered, wgs[0].running */
/* ---- the lock ---- */
bool lockdead;           /* a process died holding it: next locker repairs */
bool crashable;          /* the running critical section is a handler's */
byte crashes;
/* ---- processes and sockets ---- */
bool halive[H];          /* handler process h runs */
bool hopen[NC];          /* the handler holds the conn's open websocket */
bool pend[NC];           /* the client connected; the handler has not accepted */
bool cdrop[NC];          /* the client gave the conn up (close, or its ping deadline) */
bool sgone[NC];          /* the server side closed it (1006 on a crash) */
chan s2c[NC] = [S2C] of { mtype, byte, byte };
chan c2s[NC] = [C2S] of { mtype, byte, byte };
/* ---- the clients' view and ghosts ---- */
#define C_TODO 0         /* needs a slot: WANT it */
#define C_WANTED 1       /* WANT sent on cjc[j] */
#define C_SENT 2         /* JOB sent: waiting for its DONE */
#define C_DONE 3         /* on_done with the receipt */
#define C_LOST 4         /* on_done lost: the instance no longer knows it */
#define C_ELSEWHERE 5    /* ran elsewhere / given up (UNWANT or DECLINE) */
#define C_NOSLOT 6       /* no_slot: out of WANTs */
#define C_AWAY 7         /* its client never came back (owner grace) */
byte cj[J], cjc[J], cw[J];
byte ondone[J];          /* receipts handed to the application */
byte accepted[J];        /* book_accept succeeded */
byte offsent[J];         /* the last token an OFFER went out with */
byte kdone;              /* clients that finished */
/* scratch of one atomic step (not part of the state) */
hidden byte c, h, j, k, o, jj, gi, tk, rc;
hidden mtype m;
hidden byte mk[J];       /* mail taken: 0 none, OFFER, DONE */
hidden byte mc[J], mt[J];/* its conn and token */
hidden byte mx[J];       /* an OFFER_EXPIRED taken */
hidden byte mxc[J];

/* ------------------------------------------------------------------ */

#define CRASH \
	if \
	:: crashable && crashes < MAXCRASH -> crashes++; lockdead = 1; goto died \
	:: true -> skip \
	fi

#define LOCK \
	if \
	:: lockdead -> repair(); lockdead = 0 \
	:: else -> skip \
	fi

#define LIVE(c) ((c) != NIL && cst[c] == 1)
#define XI(j, c) ((j) * NC + (c))
#define XMAIL(h) (xq[0] && CHAND(0) == h || xq[1] && CHAND(1) == h || xq[2] && CHAND(2) == h || \
                  xq[3] && CHAND(0) == h || xq[4] && CHAND(1) == h || xq[5] && CHAND(2) == h || \
                  xq[6] && CHAND(0) == h || xq[7] && CHAND(1) == h || xq[8] && CHAND(2) == h)

/* bk_mail_push */
#define MAILPUSH(j, h) wmb[j] = (h)

/* bk_done_mail */
inline done_mail(j) {
	wfl[j] = wfl[j] | F_DM;
	MAILPUSH(j, CHAND(wconn[j]))
}

/* the newest live conn of client k (bk_client_newest_conn), or NIL */
inline newest(k, out) {
	out = NIL;
	if :: LIVE(0) && CCLIENT(0) == k -> out = 0 :: else fi;
	if :: LIVE(1) && CCLIENT(1) == k -> out = 1 :: else fi;
	if :: LIVE(2) && CCLIENT(2) == k -> out = 2 :: else fi
}

/* grant_one + bk_grant: while a slot is free, offer it to the best parked
 * want (one service, one priority: the lowest job index stands for the
 * smallest (stamp, seq) key) */
inline grant() {
	gi = 0;
	do
	:: gi < J && noff + nrun < P && wq[gi] ->
		wtok[gi] = wtok[gi] + 1;
		wfl[gi] = F_OM;
		wst[gi] = W_OFFERED;          /* state last */
		CRASH;                        /* grant.mid */
		wq[gi] = 0;
		noff++;
		MAILPUSH(gi, CHAND(wconn[gi]));
		gi = 0
	:: gi < J && !(noff + nrun < P && wq[gi]) -> gi++
	:: gi == J -> break
	od
}

/* bk_want_free for a PARKED or OFFERED want */
inline want_free(j) {
	if
	:: wst[j] == W_PARKED ->
		wst[j] = W_FREE; CRASH; wmb[j] = NIL; wq[j] = 0
	:: wst[j] == W_OFFERED ->
		wst[j] = W_FREE; CRASH; wmb[j] = NIL; noff--
	:: wst[j] == W_FINISHED ->
		wst[j] = W_FREE; CRASH; wmb[j] = NIL
	fi;
	wfl[j] = 0
}

/* book_want */
inline book_want(c, j, rc) {
	if
	:: !LIVE(c) -> rc = 1
	:: LIVE(c) && wst[j] != W_FREE -> rc = 1     /* duplicate_job */
	:: LIVE(c) && wst[j] == W_FREE ->
		rc = 0;
		wconn[j] = c; wfl[j] = 0;
		wst[j] = W_PARKED;
		CRASH;                                /* want.mid */
		wq[j] = 1;
		grant()
	fi
}

/* book_unwant / book_decline (find_job: PARKED/OFFERED only on its conn) */
inline book_unwant(c, j, tok, decline, rc) {
	if
	:: wconn[j] == c && (wst[j] == W_PARKED && !decline ||
	                     wst[j] == W_OFFERED && (!decline || wtok[j] == tok)) ->
		rc = 0;
		want_free(j);                         /* unwant.mid, decline.mid */
		grant()
	:: else -> rc = 1
	fi
}

/* book_accept */
inline book_accept(c, j, tok, h, rc) {
	if
	:: LIVE(c) && wconn[j] == c && wst[j] == W_OFFERED && wtok[j] == tok ->
		rc = 0;
		wrun[j] = h;
		wfl[j] = 0;
		wst[j] = W_RUNNING;
		accepted[j]++;                        /* ghost: the state write accepts */
		CRASH;                                /* accept.mid */
		wmb[j] = NIL;
		noff--; nrun++
	:: else -> rc = 1
	fi
}

/* bk_job_end (book_job_finished, and the purge with exec_lost) */
inline job_end(j) {
	if
	:: wconn[j] != NIL -> wfl[j] = F_DM
	:: else -> wfl[j] = 0
	fi;
	wst[j] = W_FINISHED;                          /* state after outcome and flags */
	CRASH;                                        /* finished.mid */
	wmb[j] = NIL;
	nrun--;
	if
	:: wfl[j] & F_DM -> MAILPUSH(j, CHAND(wconn[j]))
	:: else
	fi
}

/* bk_offer_expire (book_expire, book_conn_adopt) */
inline expire_offer(j) {
	o = wconn[j];
	xst[XI(j, o)] = 1;                            /* one record: state EXPIRED */
	wst[j] = W_FREE;
	CRASH;                                        /* expire.mid */
	wfl[j] = 0;
#ifndef MUT_EXPIRE_NO_FREE
	noff--;
#endif
	wmb[j] = NIL;                                 /* a queued OFFER turns into it */
	xq[XI(j, o)] = 1
}

/* book_conn_open (+ book_conn_adopt for protocol 2) */
inline conn_open(c) {
	k = CCLIENT(c);
	newest(k, o);
	cst[c] = 1;
	CRASH;                                        /* open.mid */
	jj = 0;
	do
	:: jj < J && JCLIENT(jj) == k && (wst[jj] == W_RUNNING || wst[jj] == W_FINISHED) &&
	   (o == NIL || wconn[jj] != c) ->
		/* o == NIL: the client was in its grace (re-adopt);
		 * else protocol 2's adopt takes over its other conns' jobs */
		wconn[jj] = c;
		if :: wst[jj] == W_FINISHED -> done_mail(jj) :: else fi;
		CRASH;
		jj++
	:: jj < J && !(JCLIENT(jj) == k && (wst[jj] == W_RUNNING || wst[jj] == W_FINISHED) &&
	   (o == NIL || wconn[jj] != c)) -> jj++
	:: jj == J -> break
	od;
#ifndef MUT_ADOPT_KEEPS_OFFERS
	/* protocol 2's adopt also withdraws the offers on the client's other
	 * conns (bk_offer_expire), in the same critical section, and grants
	 * their slots again (expire_offer clobbers o: the branch is taken) */
	if
	:: o != NIL ->
		jj = 0;
		do
		:: jj < J && JCLIENT(jj) == k && wst[jj] == W_OFFERED -> expire_offer(jj); jj++
		:: jj < J && !(JCLIENT(jj) == k && wst[jj] == W_OFFERED) -> jj++
		:: jj == J -> break
		od;
		grant()
	:: else
	fi
#endif
}

/* bk_conn_drop + book_conn_close's grant */
inline conn_drop(c) {
	k = CCLIENT(c);
	cst[c] = 2;
	CRASH;                                        /* close.mid */
	jj = 0;
	do
	:: jj < J ->
		if
		:: (wst[jj] == W_PARKED || wst[jj] == W_OFFERED) && wconn[jj] == c ->
			want_free(jj)
		:: else
		fi;
		if
		:: xst[XI(jj, c)] -> xst[XI(jj, c)] = 0; xq[XI(jj, c)] = 0
		:: else
		fi;
		jj++
	:: jj == J -> break
	od;
	newest(k, o);
	jj = 0;
	do
	:: jj < J ->
		if
		:: (wst[jj] == W_RUNNING || wst[jj] == W_FINISHED) && wconn[jj] == c ->
			wconn[jj] = o;                /* NIL: the grace */
			if
			:: o != NIL && wst[jj] == W_FINISHED -> done_mail(jj)
			:: o == NIL && (wfl[jj] & F_DM) -> wfl[jj] = wfl[jj] & ~F_DM; wmb[jj] = NIL
			:: else
			fi
		:: else
		fi;
		jj++
	:: jj == J -> break
	od
}

/* book_purge_handler */
inline purge(h) {
	jj = 0;
	do
	:: jj < J && wst[jj] == W_RUNNING && wrun[jj] == h -> job_end(jj); jj++
	:: jj < J && !(wst[jj] == W_RUNNING && wrun[jj] == h) -> jj++
	:: jj == J -> break
	od;
	c = 0;
	do
	:: c < NC && LIVE(c) && CHAND(c) == h -> conn_drop(c); c++
	:: c < NC && !(LIVE(c) && CHAND(c) == h) -> c++
	:: c == NC -> break
	od;
	jj = 0;
	do
	:: jj < J ->
		if
		:: wmb[jj] == h -> wmb[jj] = NIL; wfl[jj] = wfl[jj] & ~F_OM
		:: else
		fi;
		jj++
	:: jj == J -> break
	od;
	jj = 0;
	do
	:: jj < J * NC ->
		if :: xq[jj] && CHAND(jj % NC) == h -> xq[jj] = 0; xst[jj] = 0 :: else fi;
		jj++
	:: jj == J * NC -> break
	od;
	grant()
}

/* book_repair: derived state rebuilt from the primary records */
inline repair() {
	noff = 0; nrun = 0;
	jj = 0;
	do
	:: jj < J ->
		wmb[jj] = NIL; wq[jj] = 0;
		/* repair_want_records: a PARKED/OFFERED/EXPIRED want of a dead
		 * conn goes; a job's owner that is gone is forgotten */
		if
		:: (wst[jj] == W_PARKED || wst[jj] == W_OFFERED) && !LIVE(wconn[jj]) ->
			wst[jj] = W_FREE; wfl[jj] = 0
		:: wst[jj] == W_PARKED -> wfl[jj] = 0
		:: (wst[jj] == W_RUNNING || wst[jj] == W_FINISHED) && !LIVE(wconn[jj]) ->
			wconn[jj] = NIL
		:: else
		fi;

		/* link_want */
		if
		:: wst[jj] == W_PARKED -> wq[jj] = 1
		:: wst[jj] == W_OFFERED -> noff++;
#ifdef MUT_NO_PENDING_FLAG
			MAILPUSH(jj, CHAND(wconn[jj]))
#else
#ifndef MUT_REPAIR_NO_MAIL
			if :: wfl[jj] & F_OM -> MAILPUSH(jj, CHAND(wconn[jj])) :: else fi
#endif
#endif
		:: wst[jj] == W_RUNNING -> nrun++;
			if :: wconn[jj] == NIL -> newest(JCLIENT(jj), o); wconn[jj] = o :: else fi
		:: wst[jj] == W_FINISHED ->
			if
			:: wconn[jj] == NIL -> newest(JCLIENT(jj), o);
				if :: o != NIL -> wconn[jj] = o; wfl[jj] = wfl[jj] | F_DM :: else fi
			:: else
			fi;
			if :: wconn[jj] == NIL -> wfl[jj] = wfl[jj] & ~F_DM :: else fi;
#ifndef MUT_REPAIR_NO_MAIL
			if :: wfl[jj] & F_DM -> MAILPUSH(jj, CHAND(wconn[jj])) :: else fi
#endif
		:: else
		fi;
#ifndef MUT_REPAIR_NO_MAIL
#endif
		jj++
	:: jj == J -> break
	od;
	/* the EXPIRED records: dropped with a dead conn, else (re-)queued */
	jj = 0;
	do
	:: jj < J * NC ->
		xq[jj] = 0;
		if :: xst[jj] && !LIVE(jj % NC) -> xst[jj] = 0 :: else fi;
#ifndef MUT_REPAIR_NO_MAIL
		if :: xst[jj] -> xq[jj] = 1 :: else fi;
#endif
		jj++
	:: jj == J * NC -> break
	od;
	grant()
}

/* a message to the client: lost when the client gave the conn up (a
 * half-open connection, or one it closed) */
#define SEND(c, m, a, b) \
	if \
	:: cdrop[c] -> skip \
	:: else -> assert(nfull(s2c[c])); s2c[c]!m, a, b \
	fi


/* a message to the server: lost when the server side is gone */
#define CSEND(m, a, b) \
	if \
	:: sgone[kc] -> skip \
	:: else -> assert(nfull(c2s[kc])); c2s[kc]!m, a, b \
	fi

/* ------------------------------------------------------------------ */

proctype handler(byte me)
{

end_loop:
	do
	/* a connection upgraded: broker_register (book_conn_open,
	 * book_conn_adopt), broker_attach (HELLO) */
	:: atomic { halive[me] && ((pend[0] && CHAND(0) == me) || (pend[1] && CHAND(1) == me) || (pend[2] && CHAND(2) == me)) ->
		if :: pend[0] && CHAND(0) == me -> c = 0 :: pend[1] && CHAND(1) == me -> c = 1 :: pend[2] && CHAND(2) == me -> c = 2 fi;
		crashable = 1;
		LOCK; conn_open(c);
		crashable = 0;
		pend[c] = 0; hopen[c] = 1;
		SEND(c, HELLO, 0, 0)
	   }
	/* a message from a client (on_text) */
	:: atomic { halive[me] && ((hopen[0] && CHAND(0) == me && len(c2s[0]) > 0) || (hopen[1] && CHAND(1) == me && len(c2s[1]) > 0) || (hopen[2] && CHAND(2) == me && len(c2s[2]) > 0)) ->
		if :: hopen[0] && CHAND(0) == me && len(c2s[0]) > 0 -> c = 0 :: hopen[1] && CHAND(1) == me && len(c2s[1]) > 0 -> c = 1 :: hopen[2] && CHAND(2) == me && len(c2s[2]) > 0 -> c = 2 fi;
		c2s[c]?m, j, tk;
		crashable = 1;
		LOCK;
		if
		:: m == WANT -> book_want(c, j, rc);           /* on_want */
			crashable = 0;
			if :: rc -> SEND(c, ERR_REFUSED, j, 0) :: else fi
		:: m == UNWANT -> book_unwant(c, j, 0, 0, rc);  /* on_unwant */
			crashable = 0
		:: m == DECLINE -> book_unwant(c, j, tk, 1, rc); /* on_decline */
			crashable = 0
		:: m == JOB -> book_accept(c, j, tk, me, rc);     /* on_job */
			crashable = 0;
			if :: rc -> SEND(c, ERR_REFUSED, j, 0) :: else fi
		:: m == ACK ->                                 /* on_ack, book_done_ack */
			if
			:: wst[j] == W_FINISHED && JCLIENT(j) == CCLIENT(c) -> want_free(j)
			:: else
			fi;
			crashable = 0
		:: m == QUERY ->                               /* on_query, book_query */
			crashable = 0;
			if
			:: JCLIENT(j) == CCLIENT(c) && (wst[j] == W_RUNNING || wst[j] == W_FINISHED ||
			   (wst[j] == W_PARKED || wst[j] == W_OFFERED) && wconn[j] == c) ->
				SEND(c, POS, j, 0)
			:: else -> SEND(c, ERR_UNKNOWN, j, 0)
			fi
		fi
	   }
	/* the connection ended: a close frame, FIN, or the ping deadline
	 * of a half-open one (on_closed, broker_unregister, book_conn_close) */
	:: atomic { halive[me] && ((hopen[0] && CHAND(0) == me && cdrop[0]) || (hopen[1] && CHAND(1) == me && cdrop[1]) || (hopen[2] && CHAND(2) == me && cdrop[2])) ->
		if :: hopen[0] && CHAND(0) == me && cdrop[0] -> c = 0 :: hopen[1] && CHAND(1) == me && cdrop[1] -> c = 1 :: hopen[2] && CHAND(2) == me && cdrop[2] -> c = 2 fi;
		hopen[c] = 0;
		do :: len(c2s[c]) > 0 -> c2s[c]?m, j, tk :: else -> break od;
		crashable = 1;
		LOCK; conn_drop(c); grant();
		crashable = 0
	   }
	/* a job's program ended (job_end_report, book_job_finished) */
	:: atomic { halive[me] && ((wst[0] == W_RUNNING && wrun[0] == me) || (wst[1] == W_RUNNING && wrun[1] == me) || (wst[2] == W_RUNNING && wrun[2] == me)) ->
		if :: wst[0] == W_RUNNING && wrun[0] == me -> j = 0 :: wst[1] == W_RUNNING && wrun[1] == me -> j = 1 :: wst[2] == W_RUNNING && wrun[2] == me -> j = 2 fi;
		crashable = 1;
		LOCK; job_end(j); grant();
		crashable = 0
	   }
	/* the eventfd said "look" (mailbox_on_wake, book_mail_take) */
	:: atomic { halive[me] && (wmb[0] == me || wmb[1] == me || wmb[2] == me ||
	                          XMAIL(me)) ->
		crashable = 1;
		LOCK;
		jj = 0;
		do
		:: jj < J ->
			mk[jj] = 0; mx[jj] = 0;
			if
			:: xq[XI(jj, 0)] && CHAND(0) == me -> mxc[jj] = 0
			:: xq[XI(jj, 1)] && CHAND(1) == me -> mxc[jj] = 1
			:: xq[XI(jj, 2)] && CHAND(2) == me -> mxc[jj] = 2
			:: else -> mxc[jj] = NIL
			fi;
			if
			:: mxc[jj] != NIL ->
				xq[XI(jj, mxc[jj])] = 0; CRASH;          /* mail.mid */
				mx[jj] = 1; xst[XI(jj, mxc[jj])] = 0
			:: else
			fi;
			if
			:: wmb[jj] == me ->
				wmb[jj] = NIL; CRASH;          /* mail.mid */
				if
#ifdef MUT_NO_PENDING_FLAG
				:: wst[jj] == W_OFFERED ->
#else
				:: wst[jj] == W_OFFERED && (wfl[jj] & F_OM) ->
#endif
					wfl[jj] = wfl[jj] & ~F_OM;
					mk[jj] = OFFER; mc[jj] = wconn[jj]; mt[jj] = wtok[jj]
				:: wst[jj] == W_FINISHED && (wfl[jj] & F_DM) ->
					wfl[jj] = wfl[jj] & ~F_DM;
					mk[jj] = DONE; mc[jj] = wconn[jj]
				:: else
				fi
			:: else
			fi;
			jj++
		:: jj == J -> break
		od;
		crashable = 0;
		/* deliver what was taken, outside the lock (mailbox.c
		 * deliver); the handler may die before */
		if
		:: crashes < MAXCRASH -> crashes++; goto died
		:: true
		fi;
		jj = 0;
		do
		:: jj < J ->
			if
			:: mx[jj] && hopen[mxc[jj]] ->        /* broker_deliver_offer_expired */
				SEND(mxc[jj], ERR_EXPIRED, jj, 0)
			:: else
			fi;
			if
			:: mk[jj] == OFFER ->                  /* broker_deliver_offer */
				c = mc[jj];
				if
				:: hopen[c] ->
					assert(offsent[jj] != mt[jj]);   /* never one OFFER twice */
					offsent[jj] = mt[jj];
					SEND(c, OFFER, jj, mt[jj])
				:: else ->                         /* gone: give the slot back */
					crashable = 1;
					LOCK; book_unwant(c, jj, mt[jj], 1, rc);
					crashable = 0
				fi
			:: mk[jj] == DONE && hopen[mc[jj]] && wst[jj] == W_FINISHED ->
				/* broker_deliver_done: book_done_read, send */
				SEND(mc[jj], DONE, jj, 0);
#ifdef MUT_DONE_NO_KEEP
				crashable = 1;                     /* book_done_delivered */
				LOCK; want_free(jj);
				crashable = 0
#endif
			:: else
			fi;
			mk[jj] = 0; mx[jj] = 0;
			jj++
		:: jj == J -> break
		od
	   }
	/* the handler dies between two events */
	:: atomic { halive[me] && crashes < MAXCRASH -> crashes++; goto died }
	od;

died:
	/* _exit: its sockets close (the clients see 1006), its taken mail is
	 * lost; the master reaps it, purges, forks a replacement */
	atomic {
		crashable = 0;
		halive[me] = 0;
		c = 0;
		do
		:: c < NC ->
			if
			:: hopen[c] && CHAND(c) == me -> hopen[c] = 0; sgone[c] = 1;
				do :: len(c2s[c]) > 0 -> c2s[c]?m, j, tk :: else -> break od
			:: else
			fi;
			c++
		:: c == NC -> break
		od;
	};
	/* the replacement process: same slot, fresh memory */
	atomic { halive[me] -> goto end_loop }
}

/* the master: the 100 ms tick (book_expire) and the reaping of a dead
 * handler (purge_handler, book_purge_handler, spawn_handler) */
active proctype master()
{

end_loop:
	do
	:: atomic { wst[0] == W_OFFERED -> j = 0; LOCK; if :: wst[j] == W_OFFERED -> expire_offer(j) :: else fi; grant() }
	:: atomic { wst[1] == W_OFFERED -> j = 1; LOCK; if :: wst[j] == W_OFFERED -> expire_offer(j) :: else fi; grant() }
	:: atomic { wst[2] == W_OFFERED -> j = 2; LOCK; if :: wst[j] == W_OFFERED -> expire_offer(j) :: else fi; grant() }
	:: atomic { !halive[0] && crashes > 0 -> h = 0;
		LOCK; purge(h); halive[h] = 1
	   }
	:: atomic { !halive[1] && crashes > 0 -> h = 1;
		LOCK; purge(h); halive[h] = 1
	   }
	od;
died:
	assert(false)
}

/* ------------------------------------------------------------------ */

/* a client (libexecclient with protocol 2): places its jobs, takes the
 * first OFFER, acknowledges every DONE and keeps the first */
proctype client(byte me; byte first; byte last; byte j0; byte j1)
{
	byte kc = NIL, nxt = first, drops = 0;
	bool ready;

	do
	/* connect (again): conn_open, at any moment after it gave the
	 * last conn up (no timing assumption: an offer it answered there
	 * may still be open on the server, its JOB still on the way) */
	:: atomic { kc == NIL && nxt <= last ->
		kc = nxt; nxt++; ready = 0; pend[kc] = 1
	   }
	/* place a job that needs a slot (job_place, WANT) */
	:: atomic { kc != NIL && ready && len(s2c[kc]) == 0 && ((cj[j0] == C_TODO && cw[j0] < WANTS) || (cj[j1] == C_TODO && cw[j1] < WANTS)) ->
		if :: cj[j0] == C_TODO && cw[j0] < WANTS -> j = j0 :: cj[j1] == C_TODO && cw[j1] < WANTS -> j = j1 fi;
		cj[j] = C_WANTED; cjc[j] = kc; cw[j]++;
		CSEND(WANT, j, 0)
	   }
	/* out of tries: no_slot */
	:: atomic { cj[j0] == C_TODO && cw[j0] == WANTS -> cj[j0] = C_NOSLOT }
	:: atomic { cj[j1] == C_TODO && cw[j1] == WANTS -> cj[j1] = C_NOSLOT }
	/* the job got a slot elsewhere: UNWANT here (it may cross an OFFER) */
	:: atomic { me == 0 && UNWANTS && kc != NIL && len(s2c[kc]) == 0 && cj[j1] == C_WANTED && cjc[j1] == kc ->
		j = j1;
		cj[j] = C_ELSEWHERE;
		CSEND(UNWANT, j, 0)
	   }
	/* a message from the server */
	:: atomic { kc != NIL && len(s2c[kc]) > 0 ->
		s2c[kc]?m, j, tk;
		if
		:: m == HELLO -> ready = 1;
			/* job_resume_on: ask whether the instance still knows
			 * the jobs whose DONE is owed */
			if :: cj[j0] == C_SENT && cjc[j0] != kc -> CSEND(QUERY, j0, 0) :: else fi;
			if :: cj[j1] == C_SENT && cjc[j1] != kc -> CSEND(QUERY, j1, 0) :: else fi
		:: m == OFFER && cj[j] == C_WANTED && cjc[j] == kc ->
			if
			:: cj[j] = C_SENT; CSEND(JOB, j, tk)
			:: me == 0 && j == j1 && ELSEWHERE -> cj[j] = C_ELSEWHERE; CSEND(DECLINE, j, tk)   /* a slot elsewhere came first */
			fi
		:: m == OFFER && !(cj[j] == C_WANTED && cjc[j] == kc) ->
			CSEND(DECLINE, j, tk)                 /* a surplus OFFER */
		:: m == DONE ->
			if
			:: cj[j] != C_DONE ->
				assert(cj[j] == C_SENT);             /* never a receipt for a job it thinks lost */
				cj[j] = C_DONE; ondone[j]++
			:: else
			fi;
			CSEND(ACK, j, 0)                     /* every copy */
		:: m == ERR_EXPIRED || m == ERR_REFUSED ->
			if
			:: cj[j] == C_WANTED && cjc[j] == kc -> cj[j] = C_TODO
			:: cj[j] == C_SENT && cjc[j] == kc && m == ERR_REFUSED -> cj[j] = C_TODO
			:: else
			fi
		:: m == ERR_UNKNOWN ->                   /* job_receipt_gone */
			if :: cj[j] == C_SENT -> cj[j] = C_LOST :: else fi
		:: m == POS
		fi
	   }
	/* the server closed it (its handler died: 1006), or the client gives
	 * it up (closes it, or its ping deadline found it silent) */
	:: atomic { kc != NIL && (sgone[kc] || me == 0 && drops < MAXDROP) ->
		if :: !sgone[kc] -> drops++ :: else fi;
		cdrop[kc] = 1;
		do :: len(s2c[kc]) > 0 -> s2c[kc]?m, j, tk :: else -> break od;   /* never read */
		if :: cj[j0] == C_WANTED && cjc[j0] == kc -> cj[j0] = C_TODO :: else fi;
		if :: cj[j1] == C_WANTED && cjc[j1] == kc -> cj[j1] = C_TODO :: else fi;
		kc = NIL
	   }
	/* no connection left to try: what is owed ends lost (owner grace) */
	:: atomic { kc == NIL && nxt > last &&
	            (cj[j0] == C_TODO || cj[j0] == C_SENT || cj[j1] == C_TODO || cj[j1] == C_SENT) ->
		if :: cj[j0] == C_SENT -> cj[j0] = C_AWAY :: cj[j0] == C_TODO -> cj[j0] = C_NOSLOT :: else fi;
		if :: cj[j1] == C_SENT -> cj[j1] = C_AWAY :: cj[j1] == C_TODO -> cj[j1] = C_NOSLOT :: else fi
	   }
	/* every job has its verdict: close and stop */
	:: atomic { cj[j0] >= C_DONE && cj[j1] >= C_DONE ->
		if
		:: kc != NIL -> cdrop[kc] = 1;
			do :: len(s2c[kc]) > 0 -> s2c[kc]?m, j, tk :: else -> break od
		:: else
		fi;
		/* every JOB the server accepted gave exactly one receipt,
		 * unless the client stayed away */
		assert(accepted[j0] == 0 || cj[j0] == C_AWAY || ondone[j0] == 1);
		assert(accepted[j1] == 0 || cj[j1] == C_AWAY || ondone[j1] == 1);
		assert(accepted[j0] == 1 || ondone[j0] == 0);
		assert(accepted[j1] == 1 || ondone[j1] == 0);
		kdone++;
		break
	   }
	od
}

/* the book's invariants at every state outside a critical section
 * (book_check): derived matches primary, grants are eager, no slot is
 * offered or held twice */
#define NOFF ((wst[0] == W_OFFERED) + (wst[1] == W_OFFERED) + (wst[2] == W_OFFERED))
#define NRUN ((wst[0] == W_RUNNING) + (wst[1] == W_RUNNING) + (wst[2] == W_RUNNING))
#define MAILOK(j) ((!(wst[j] == W_OFFERED && (wfl[j] & F_OM)) || wmb[j] == CHAND(wconn[j])) && \
                   (!(wst[j] == W_FINISHED && (wfl[j] & F_DM)) || wmb[j] == CHAND(wconn[j])) && \
                   (wq[j] == (wst[j] == W_PARKED)))
#define PARKED_ANY (wst[0] == W_PARKED || wst[1] == W_PARKED || wst[2] == W_PARKED)
#define BOOK_OK (NOFF + NRUN <= P && \
                 (lockdead || (noff == NOFF && nrun == NRUN && MAILOK(0) && MAILOK(1) && MAILOK(2) && \
                               !(PARKED_ANY && NOFF + NRUN < P))))

active proctype book_check()
{
end:	atomic { !BOOK_OK -> assert(BOOK_OK) }
}

/* no slot lost: once the clients are gone, every job has ended and the
 * book is not waiting for a repair, every slot is free */
active proctype slots_free()
{
end:	atomic {
		kdone == 2 && !hopen[0] && !hopen[1] && !hopen[2] && !lockdead &&
		halive[0] && halive[1] && NRUN == 0 ->
		assert(NOFF == 0 && !PARKED_ANY && noff == 0 && nrun == 0)
	}
}

init
{
	byte i;
	atomic {
		i = 0;
		do
		:: i < J -> wconn[i] = NIL; wmb[i] = NIL; cjc[i] = NIL; i++
		:: i == J -> break
		od;
		halive[0] = 1; halive[1] = 1;
		run handler(0); run handler(1);
		run client(0, 0, 1, 0, 1);
		run client(1, 2, 2, 2, 2)
	}
}
