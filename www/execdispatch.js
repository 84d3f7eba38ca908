/*
 * execdispatch.js - execdispatch's console page: polls
 * /console/api/overview every 2 s (counts by state, services,
 * dispatchers, the execservers this one reaches, which optional SQL
 * functions exist); the job list and a job's page are asked for on
 * demand (/console/api/jobs with keyset pages: "Next page" sends the id
 * of the last job shown as after; /console/api/job?id=).  Actions POST
 * to /console/api/cancel | retry | pause | resume; a button appears only
 * where its SQL function exists, asks "Confirm ..." before it posts, and
 * writes the answer in the status line #answer.  Text goes into the DOM as text only.
 */
"use strict";

(() => {
	const { el, table, duration } = Console;
	const $ = (id) => document.getElementById(id);
	const PAGE = 50;
	let features = {}, list = { after: null, pages: 0 }, openId = null;

	function stamp(t) {
		return t ? new Date(t).toLocaleString() : "–";
	}

	function jobLink(id) {
		return el("a", { href: "#job-" + id, "data-key": "job-" + id,
			onclick: (ev) => { ev.preventDefault(); openJob(String(id)); } }, String(id));
	}

	// An armed button stays armed (5 s) across the overview's re-render
	// every 2 s: the arming is kept by the button's key, not the element.
	// The last action's answer goes to the status line #answer, which no
	// re-render replaces.
	const armedUntil = new Map();

	function actionButton(label, path, key, after) {
		const armed = () => (armedUntil.get(key) || 0) > Date.now();
		const b = el("button", { type: "button", class: "danger", "data-key": key });
		b.textContent = armed() ? "Confirm " + label.toLowerCase() : label;
		b.addEventListener("click", async () => {
			if (!armed()) {
				armedUntil.set(key, Date.now() + 5000);
				b.textContent = "Confirm " + label.toLowerCase();
				setTimeout(() => { if (!armed()) b.textContent = label; }, 5000);
				return;
			}
			armedUntil.delete(key);
			b.disabled = true;
			const what = label + " " + key.slice(key.indexOf("-") + 1);
			try {
				const answer = await Console.post(path);
				b.textContent = label + ": " + answer;
				$("answer").textContent = what + ": " + answer;
			} catch (e) {
				b.textContent = label + " failed: " + e.message;
				$("answer").textContent = what + " failed: " + e.message;
			}
			if (after) after();
		});
		return b;
	}

	function drawOverview(d) {
		features = d.features || {};
		$("facts").replaceChildren(el("span", null, "instance " + d.instance));
		Console.render("states", table([
			{ title: "state", cell: (r) => r.state },
			{ title: "jobs", num: true, cell: (r) => String(r.rows) },
			{ title: "", cell: (r) => r.estimated ? el("span", { class: "muted", text: "estimated" }) : "" },
		], d.states || []));
		Console.render("dispatchers", table([
			{ title: "instance", cell: (r) => r.instance },
			{ title: "host", cell: (r) => r.host },
			{ title: "heartbeat", num: true, cell: (r) => duration(r.heartbeat_age_ms) + " ago" },
			{ title: "held", num: true, cell: (r) => String(r.held) },
			{ title: "claims", cell: (r) => r.claiming_nothing ? el("span", { class: "warn", text: r.claiming_nothing }) : "yes" },
		], d.dispatchers || [], "no dispatcher is running"));
		Console.render("execservers", table([
			{ title: "execserver address (this dispatcher)", cell: (r) => r.address },
			{ title: "connections", num: true, cell: (r) => String(r.connections) },
			{ title: "instances", num: true, cell: (r) => String(r.instances) },
		], d.execservers || [], "not connected to any execserver"));
		const svc = [
			{ title: "service", cell: (r) => r.service },
			{ title: "queued", num: true, cell: (r) => String(r.queued) },
			{ title: "claimed", num: true, cell: (r) => String(r.claimed) },
			{ title: "running", num: true, cell: (r) => String(r.running) },
			{ title: "done/h", num: true, cell: (r) => String(r.done_last_hour) },
			{ title: "failed/h", num: true, cell: (r) => el("span", { class: r.failed_last_hour ? "bad" : null, text: String(r.failed_last_hour) }) },
			{ title: "oldest queued", num: true, cell: (r) => r.queued ? duration(r.oldest_queued_ms) : "–" },
			{ title: "wait p50/p95", num: true, cell: (r) => duration(r.wait_p50_ms) + " / " + duration(r.wait_p95_ms) },
			{ title: "run p50/p95", num: true, cell: (r) => duration(r.run_p50_ms) + " / " + duration(r.run_p95_ms) },
		];
		if (features.pause && features.resume)
			svc.push({ title: "", cell: (r) => el("span", null,
				actionButton("Pause", "/console/api/pause?service=" + encodeURIComponent(r.service), "pause-" + r.service),
				" ",
				actionButton("Resume", "/console/api/resume?service=" + encodeURIComponent(r.service), "resume-" + r.service)) });
		Console.render("services", table(svc, d.services || [], "no jobs in the last hour"));
	}

	function query(after) {
		const p = new URLSearchParams();
		for (const [k, id] of [["state", "f-state"], ["service", "f-service"], ["since", "f-since"]])
			if ($(id).value.trim()) p.set(k, $(id).value.trim());
		if (after) p.set("after", after);
		p.set("limit", PAGE);
		return "/console/api/jobs?" + p.toString();
	}

	async function loadJobs(after) {
		try {
			const rows = await Console.get(query(after));
			list.pages = after ? list.pages + 1 : 1;
			list.after = rows.length === PAGE ? String(rows[rows.length - 1].id) : null;
			Console.render("jobs", table([
				{ title: "id", cell: (r) => jobLink(r.id) },
				{ title: "service", cell: (r) => r.service },
				{ title: "state", cell: (r) => el("span", { class: r.state === "failed" ? "bad" : r.state === "done" ? "ok" : null, text: r.state }) },
				{ title: "priority", num: true, cell: (r) => String(r.priority) },
				{ title: "attempts", num: true, cell: (r) => String(r.attempts) },
				{ title: "created", cell: (r) => stamp(r.created_at) },
				{ title: "finished", cell: (r) => stamp(r.finished_at) },
				{ title: "error", cell: (r) => r.error || "" },
			], rows, "no jobs"));
			$("next").disabled = !list.after;
			$("pageinfo").textContent = `page ${list.pages}, ${rows.length} jobs`;
		} catch (e) {
			$("pageinfo").textContent = "The list failed: " + e.message;
		}
	}

	function kv(pairs) {
		return el("table", null, el("tbody", null, ...pairs.filter((p) => p[1] !== undefined).map(([k, v]) =>
			el("tr", null, el("th", { scope: "row", text: k }), el("td", null, v === null ? "–" : v)))));
	}

	async function openJob(id) {
		openId = id;
		$("jobpanel").hidden = false;
		try {
			const d = await Console.get("/console/api/job?id=" + encodeURIComponent(id));
			const j = d.row.job, pos = d.row.position, f = d.features || {};
			const acts = [];
			if (["queued", "claimed", "running"].includes(j.state))
				acts.push(actionButton("Cancel", "/console/api/cancel?id=" + j.id, "cancel-" + j.id, () => openJob(id)));
			if (f.retry && ["failed", "cancelled"].includes(j.state))
				acts.push(actionButton("Retry", "/console/api/retry?id=" + j.id, "retry-" + j.id, () => openJob(id)));
			$("actions").replaceChildren(...acts);
			const parts = [el("h3", { id: "job-state", text: `Job ${j.id}: ${j.state}` }), kv([
				["service", j.service], ["state", j.state], ["priority", String(j.priority)],
				["attempts", String(j.attempts)], ["runner", j.runner_instance],
				["created", stamp(j.created_at)], ["due", stamp(j.start_after)],
				["started", stamp(j.started_at)], ["finished", stamp(j.finished_at)],
				["error", j.error],
				["position", pos ? (pos.ahead !== null && pos.ahead !== undefined ? `${pos.ahead} ahead` : "–") +
					(pos.eta_ms ? `, ETA ${duration(pos.eta_ms)}` : "") + (pos.waiting ? ` (${pos.waiting})` : "") : undefined],
				["progress", j.progress !== undefined ? JSON.stringify(j.progress) : undefined],
			]), el("h3", { text: "Payload" }), el("pre", { text: JSON.stringify(j.job, null, 2) })];
			if (j.receipt) parts.push(el("h3", { text: "Receipt" }), el("pre", { text: JSON.stringify(j.receipt, null, 2) }));
			if (d.row.attempts) parts.push(el("h3", { text: "Attempts" }), el("pre", { text: JSON.stringify(d.row.attempts, null, 2) }));
			$("job").replaceChildren(...parts);
		} catch (e) {
			$("actions").replaceChildren();
			$("job").replaceChildren(el("div", { class: "bad", text: `Job ${id}: ${e.message}` }));
		}
	}

	document.addEventListener("DOMContentLoaded", () => {
		$("filter").addEventListener("submit", (ev) => { ev.preventDefault(); loadJobs(null); });
		$("first").addEventListener("click", () => loadJobs(null));
		$("next").addEventListener("click", () => { if (list.after) loadJobs(list.after); });
		$("f-open").addEventListener("click", () => { if ($("f-id").value.trim()) openJob($("f-id").value.trim()); });
		let first = true;
		Console.start({
			main: "console", data: "/console/api/overview", interval: 2000,
			draw: (d) => {
				drawOverview(d);
				if (first) { first = false; loadJobs(null); }
			},
		});
	});
})();
