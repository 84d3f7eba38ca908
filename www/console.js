/*
 * console.js - what every console page shares (execserver's and
 * execdispatch's): the sign-in with a bearer token kept in
 * sessionStorage, requests that carry it in the Authorization header
 * (never in a URL), polling without overlap, DOM building through
 * textContent only (data is never parsed as HTML), tables, durations and
 * small SVG plots.  A page script calls Console.start(options); get()
 * and post() are its other requests.
 */
"use strict";

const Console = (() => {
	const KEY = "console-token";
	const $ = (id) => document.getElementById(id);

	function token() {
		return sessionStorage.getItem(KEY);
	}

	/* el("td", {class: "num"}, "text", child...): text goes in as text. */
	function el(tag, attrs, ...children) {
		const e = document.createElement(tag);
		for (const [k, v] of Object.entries(attrs || {})) {
			if (v === undefined || v === null || v === false) continue;
			if (k === "class") e.className = v;
			else if (k === "text") e.textContent = v;
			else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
			else e.setAttribute(k, v === true ? "" : String(v));
		}
		for (const c of children) {
			if (c === undefined || c === null) continue;
			e.append(c instanceof Node ? c : document.createTextNode(String(c)));
		}
		return e;
	}

	/* columns: [{title, num, cell(row) -> string|Node}]; rows: array. */
	function table(columns, rows, empty) {
		if (!rows.length) return el("div", { class: "empty", text: empty || "none" });
		const head = el("tr", null, ...columns.map((c) =>
			el("th", { class: c.num ? "num" : null, scope: "col", text: c.title })));
		const body = rows.map((r) => el("tr", null, ...columns.map((c) =>
			el("td", { class: c.num ? "num" : null }, c.cell(r)))));
		return el("table", null, el("thead", null, head), el("tbody", null, ...body));
	}

	function duration(ms) {
		if (ms === null || ms === undefined) return "–";
		if (ms < 1000) return ms + " ms";
		const s = ms / 1000;
		if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
		const m = Math.floor(s / 60);
		if (m < 60) return m + " min " + Math.floor(s % 60) + " s";
		return Math.floor(m / 60) + " h " + (m % 60) + " min";
	}

	function clockTime(msAgo) {
		return new Date(Date.now() - msAgo).toLocaleTimeString();
	}

	/* A polyline of values (oldest first) scaled to the largest. */
	function sparkline(values, label) {
		const NS = "http://www.w3.org/2000/svg", w = 300, h = 48;
		const svg = document.createElementNS(NS, "svg");
		svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
		svg.setAttribute("preserveAspectRatio", "none");
		svg.setAttribute("role", "img");
		svg.setAttribute("aria-label", label);
		const base = document.createElementNS(NS, "line");
		base.setAttribute("x1", 0); base.setAttribute("x2", w);
		base.setAttribute("y1", h - 1); base.setAttribute("y2", h - 1);
		svg.append(base);
		const max = Math.max(1e-9, ...values);
		const n = Math.max(2, values.length);
		const pts = values.map((v, i) =>
			`${((i + n - values.length) * w / (n - 1)).toFixed(1)},${(h - 2 - v / max * (h - 6)).toFixed(1)}`);
		const line = document.createElementNS(NS, "polyline");
		line.setAttribute("points", pts.join(" "));
		svg.append(line);
		return svg;
	}

	/* Replaces the content of the element with id, keeping keyboard focus
	 * on the element with the same data-key across the redraw. */
	function render(id, node) {
		const box = $(id), active = document.activeElement;
		const key = active && box.contains(active) ? active.dataset.key : null;
		box.replaceChildren(node);
		if (key) {
			const again = box.querySelector(`[data-key="${CSS.escape(key)}"]`);
			if (again) again.focus();
		}
	}

	class Unauthorized extends Error {}

	/* fetch with the token; a 401 means: sign in (again). */
	async function api(path, options) {
		const o = Object.assign({ headers: {}, cache: "no-store", credentials: "omit" }, options);
		const t = token();
		if (t) o.headers.Authorization = "Bearer " + t;
		const r = await fetch(path, o);
		if (r.status === 401) throw new Unauthorized();
		return r;
	}

	let opts, timer = null, generation = 0;

	function showSignin(message) {
		generation++;
		clearTimeout(timer);
		$(opts.main).hidden = true;
		$("signout").hidden = true;
		$("banner").hidden = true;
		$("signin").hidden = false;
		$("signin-error").textContent = message || "";
		$("token").focus();
	}

	async function tick(gen) {
		if (gen !== generation) return;
		try {
			const r = await api(opts.data);
			if (!r.ok) throw new Error(`${opts.data}: HTTP ${r.status}`);
			const data = await r.json();
			if (gen !== generation) return;
			$("signin").hidden = true;
			$("signin-error").textContent = "";
			$(opts.main).hidden = false;
			$("signout").hidden = !token();
			$("banner").hidden = true;
			opts.draw(data);
			$("updated").textContent = "updated " + new Date().toLocaleTimeString();
		} catch (e) {
			if (e instanceof Unauthorized) {
				const had = token();
				sessionStorage.removeItem(KEY);
				showSignin(had ? "The token was refused." : "");
				return;
			}
			$("banner").hidden = false;
			$("banner").textContent = "No answer from the server (" + e.message + "); trying again.";
		}
		if (gen === generation)
			timer = setTimeout(() => tick(gen), opts.interval || 1000);
	}

	function restart() {
		clearTimeout(timer);
		tick(++generation);
	}

	function start(options) {
		opts = options;
		$("signin").addEventListener("submit", (ev) => {
			ev.preventDefault();
			sessionStorage.setItem(KEY, $("token").value);
			$("token").value = "";
			restart();
		});
		$("signout").addEventListener("click", () => {
			sessionStorage.removeItem(KEY);
			showSignin("Signed out.");
		});
		restart();
	}

	/* An action: POST with the token; the answer's text, or throws. */
	async function post(path) {
		const r = await api(path, { method: "POST" });
		const text = (await r.text()).trim();
		if (!r.ok) throw new Error(text || `HTTP ${r.status}`);
		return text;
	}

	/* A read besides the polled one: the answer's JSON, or throws (a 401
	 * shows the sign-in form). */
	async function get(path) {
		let r;
		try {
			r = await api(path);
		} catch (e) {
			if (e instanceof Unauthorized) {
				sessionStorage.removeItem(KEY);
				showSignin("The token was refused.");
			}
			throw e;
		}
		if (!r.ok) throw new Error((await r.text()).trim() || `HTTP ${r.status}`);
		return r.json();
	}

	return { el, table, duration, clockTime, sparkline, render, start, post, get, restart };
})();
