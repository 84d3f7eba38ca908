/*
 * execserver.js - the execserver's console page: draws GET
 * /status?detail=1 (docs/protocol.md, "Status") once a second: slots and
 * the waiting line per waitgroup, running jobs with a cancel button,
 * handlers, services, the last failures, and rates computed here from the
 * counters of the last 5 minutes.
 */
"use strict";

(() => {
	const { el, table, duration, clockTime, sparkline, render } = Console;
	const HISTORY = 300; /* samples kept for the plots (one a second) */
	const history = [];
	const confirming = new Map(); /* job id -> when the first click expires */
	let last = null;

	const client = (j) => j.client !== null ? j.client : `anonymous (conn ${j.conn})`;

	function slotsBar(w) {
		const pct = (n) => `${(100 * n / Math.max(1, w.processes)).toFixed(2)}%`;
		const bar = el("div", { class: "slots", role: "img",
			"aria-label": `${w.running} running, ${w.offered} offered, ${w.tokens} legacy tokens, ${w.free} free of ${w.processes}` });
		for (const k of ["running", "offered", "tokens"]) {
			const s = el("span", { class: k });
			s.style.width = pct(w[k]);
			bar.append(s);
		}
		return bar;
	}

	function waitgroups(d) {
		const box = el("div", { class: "grid" });
		for (const [name, w] of Object.entries(d.waitgroups)) {
			w.free = Math.max(0, w.processes - w.running - w.offered - w.tokens);
			const line = d.waiting.filter((x) => x.waitgroup === name)
				.sort((a, b) => a.position - b.position);
			const title = d.auto_balance ? `${name} (auto-balance pool, fast reserve ${d.auto_balance.fast_reserve})` : name;
			const part = el("div", { class: "wg", "data-waitgroup": name },
				el("h3", { text: title }),
				slotsBar(w),
				el("div", { class: "legend" },
					el("span", null, el("i", { class: "running" }), `running ${w.running}`),
					el("span", null, el("i", { class: "offered" }), `offered ${w.offered}`),
					w.tokens ? el("span", null, el("i", { class: "tokens" }), `tokens ${w.tokens}`) : null,
					el("span", null, el("i", { class: "free" }), `free ${w.free} of ${w.processes}`),
					el("span", { text: `waiting ${w.waiting}` })),
				table([
					{ title: "#", num: true, cell: (x) => x.position },
					{ title: "Job", cell: (x) => x.job_id },
					{ title: "Client", cell: client },
					{ title: "Service", cell: (x) => x.service },
					{ title: "Priority", num: true, cell: (x) => x.priority },
					{ title: "Waited", num: true, cell: (x) => duration(x.waited_ms) },
				], line, "nobody waits"));
			if (w.waiting > line.length)
				part.append(el("div", { class: "muted",
					text: `the first ${line.length} of ${w.waiting} waiting wants, in grant order (up to ${d.waiting_listed_max})` }));
			box.append(part);
		}
		return box;
	}

	async function cancel(job) {
		const until = confirming.get(job.id);
		if (!until || until < Date.now()) {
			confirming.set(job.id, Date.now() + 5000);
			draw(last);
			return;
		}
		confirming.delete(job.id);
		try {
			await Console.post(`/jobs/${encodeURIComponent(job.id)}/cancel`);
		} catch (e) {
			document.getElementById("banner").hidden = false;
			document.getElementById("banner").textContent = `Cancel of ${job.job_id}: ${e.message}`;
		}
		Console.restart();
	}

	function elapsed(d, j) {
		const svc = d.services[j.service];
		const mean = svc ? svc.mean_runtime_ms : null;
		const text = mean ? `${duration(j.elapsed_ms)} of ${duration(mean)} mean` : duration(j.elapsed_ms);
		if (!mean) return text;
		const m = el("span", { class: "meter", "aria-hidden": "true" });
		const fill = el("span", { class: j.elapsed_ms > mean ? "over" : null });
		fill.style.width = `${Math.min(100, 100 * j.elapsed_ms / mean).toFixed(1)}%`;
		m.append(fill);
		return el("span", null, text, m);
	}

	function progress(j) {
		const p = j.progress;
		if (!p) return "";
		if (typeof p === "number") return `${(100 * p).toFixed(0)}%`;
		if (p.total) return `${p.done} of ${p.total}`;
		return String(p.done !== undefined ? p.done : "");
	}

	function running(d) {
		const jobs = d.jobs.filter((j) => j.state === "running");
		const offered = d.jobs.filter((j) => j.state === "offered");
		const cols = [
			{ title: "Job", cell: (j) => j.job_id },
			{ title: "Service", cell: (j) => j.service },
			{ title: "Command", cell: (j) => j.command || "–" },
			{ title: "Client", cell: client },
			{ title: "Handler", num: true, cell: (j) => j.handler },
			{ title: "Started", cell: (j) => clockTime(j.elapsed_ms) },
			{ title: "Elapsed", cell: (j) => elapsed(d, j) },
		];
		if (jobs.some((j) => j.progress !== undefined))
			cols.push({ title: "Progress", cell: progress });
		cols.push({ title: "", cell: (j) => {
			const asking = (confirming.get(j.id) || 0) > Date.now();
			return el("button", { type: "button", class: "danger", "data-key": "cancel-" + j.id,
				"aria-label": `${asking ? "Confirm cancel of" : "Cancel"} job ${j.job_id}`,
				onclick: () => cancel(j) }, asking ? "Confirm cancel" : "Cancel");
		} });
		const box = el("div", null, table(cols, jobs, "no job runs"));
		if (offered.length)
			box.append(el("div", { class: "muted",
				text: `offered, waiting for the client's JOB: ${offered.map((j) => j.job_id).join(", ")}` }));
		return box;
	}

	function failures(d) {
		return table([
			{ title: "When", cell: (f) => clockTime(f.ago_ms) },
			{ title: "Job", cell: (f) => f.job_id },
			{ title: "Client", cell: (f) => f.client !== null ? f.client : "–" },
			{ title: "Service", cell: (f) => f.service },
			{ title: "Error", cell: (f) => el("span", { class: "bad", text: f.error || (f.signal ? `signal ${f.signal}` : `exit ${f.exit_code}`) }) },
			{ title: "Exit", num: true, cell: (f) => f.signal ? `signal ${f.signal}` : f.exit_code },
			{ title: "Ran", num: true, cell: (f) => duration(f.duration_ms) },
		], d.failures, "no failure since the start");
	}

	function handlers(d, prev, dt) {
		return table([
			{ title: "Slot", num: true, cell: (h) => h.slot },
			{ title: "PID", num: true, cell: (h) => h.pid },
			{ title: "Clients", num: true, cell: (h) => h.clients },
			{ title: "Connections", num: true, cell: (h) => h.connections },
			{ title: "CPU", num: true, cell: (h) => {
				if (h.cpu_seconds === null) return "–";
				const p = prev && prev.handlers.find((x) => x.slot === h.slot && x.pid === h.pid);
				const pct = p && dt > 0 && p.cpu_seconds !== null ? ` (${(100 * (h.cpu_seconds - p.cpu_seconds) / dt).toFixed(0)}%)` : "";
				return `${h.cpu_seconds.toFixed(2)} s${pct}`;
			} },
			{ title: "Restarts", num: true, cell: (h) => el("span", { class: h.restarts ? "warn" : null, text: h.restarts }) },
		], d.handlers);
	}

	function services(d) {
		const rows = Object.entries(d.services).map(([name, s]) => Object.assign({ name }, s));
		return table([
			{ title: "Service", cell: (s) => s.enabled ? s.name : el("span", { class: "bad", title: s.disabled_why, text: `${s.name} (disabled)` }) },
			{ title: "Waitgroup", cell: (s) => s.waitgroup },
			{ title: "Class", cell: (s) => s.class || "–" },
			{ title: "Mean", num: true, cell: (s) => duration(s.mean_runtime_ms) },
			{ title: "Waiting", num: true, cell: (s) => s.waiting },
			{ title: "Running", num: true, cell: (s) => s.running },
			{ title: "Started", num: true, cell: (s) => s.started },
			{ title: "Finished", num: true, cell: (s) => s.finished },
			{ title: "Failed", num: true, cell: (s) => el("span", { class: s.failed ? "bad" : null, text: s.failed }) },
		], rows);
	}

	function counters(d) {
		let started = 0, finished = 0;
		for (const s of Object.values(d.services)) { started += s.started; finished += s.finished; }
		return { t: performance.now() / 1000, grants: d.grants, handovers: d.handovers, started, finished };
	}

	function rates() {
		const box = el("div", { class: "grid" });
		const series = [["handovers", "Hand-overs"], ["grants", "Grants"], ["started", "Jobs started"], ["finished", "Jobs finished"]];
		for (const [k, title] of series) {
			const v = [];
			for (let i = 1; i < history.length; i++) {
				const dt = history[i].t - history[i - 1].t;
				v.push(dt > 0 ? Math.max(0, history[i][k] - history[i - 1][k]) / dt : 0);
			}
			const now = v.length ? v[v.length - 1] : 0;
			box.append(el("div", { class: "plot", "data-rate": k },
				el("div", null, `${title}: `, el("span", { class: "value", text: now.toFixed(1) }), " /s"),
				sparkline(v, `${title} per second over the last ${v.length} seconds`)));
		}
		return box;
	}

	function facts(d) {
		const f = [`${d.instance_id}`, `version ${d.version}`, `listen ${d.listen}`,
			`${d.clients} clients`, `${d.connections} connections`, `${d.wants} wants`];
		if (d.draining) f.push("draining");
		return el("div", { class: "facts" }, ...f.map((t) => el("span", { class: t === "draining" ? "warn" : null, text: t })));
	}

	function draw(d) {
		if (!d) return;
		const prev = last && last !== d ? last : null;
		if (d !== last) {
			history.push(counters(d));
			if (history.length > HISTORY) history.shift();
		}
		const dt = history.length > 1 ? history[history.length - 1].t - history[history.length - 2].t : 0;
		last = d;
		document.getElementById("facts").replaceWith(Object.assign(facts(d), { id: "facts" }));
		render("waitgroups", waitgroups(d));
		render("running", running(d));
		render("rates", rates());
		render("failures", failures(d));
		render("handlers", handlers(d, prev, dt));
		render("services", services(d));
	}

	Console.start({ data: "/status?detail=1", main: "console", draw, interval: 1000 });
})();
