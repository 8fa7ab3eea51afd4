// ragmeter HTML report: the per-query table (sort, filter, pages) and the drill-down.
// Every user string reaches the page through textContent or a text node, never innerHTML.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("ragmeter-data").textContent);
  const $ = (id) => document.getElementById(id);
  const N = D.ids.length;
  const cmp = D.cmp || null;
  const idIndex = new Map(D.ids.map((id, i) => [id, i]));
  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

  function el(tag, cls, ...children) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "\u2013";
    const a = Math.abs(v);
    if (Number.isInteger(v) && a >= 1000) return String(v);
    if (a >= 1000) return v.toFixed(1);
    if (v !== 0 && a < 0.001) return v.toPrecision(3);
    return v.toFixed(4);
  }
  function signed(v) { return v === null ? "\u2013" : (v > 0 ? "+" : "") + fmt(v); }
  function relevant(g) {
    return g !== null && g !== undefined && (D.level === null ? g > 0 : g >= D.level);
  }

  // ------------------------------------------------------------------ columns
  let columns = [];
  function metricColumn(key, sys) {
    const values = D.systems[sys].scores[key];
    return { key: key, label: key, num: true, value: (i) => values[i], show: fmt };
  }
  function baseColumns() {
    const cols = [{ key: "id", label: D.kind === "rag" || D.mode === "rag" ? "sample" : "query",
      num: false, value: (i) => D.ids[i], show: String }];
    if (D.texts) cols.push({ key: "text", label: D.mode === "rag" ? "question" : "text", num: false,
      text: true, value: (i) => D.texts[i], show: (v) => (v === null ? "" : v) });
    return cols;
  }
  function setColumns(colset) {
    columns = baseColumns();
    if (cmp) {
      const a = D.systems[0].scores[cmp.metric], b = D.systems[1].scores[cmp.metric];
      const word = { w: "better", t: "tied", l: "worse" };
      columns.push({ key: "a", label: D.systems[0].label, num: true, value: (i) => a[i], show: fmt });
      columns.push({ key: "b", label: D.systems[1].label, num: true, value: (i) => b[i], show: fmt });
      columns.push({ key: "diff", label: "\u0394 (b \u2212 a)", num: true, value: (i) => b[i] - a[i],
        show: signed, cls: (v) => (v > 0 ? "pos" : v < 0 ? "neg" : "") });
      columns.push({ key: "moved", label: "|\u0394|", num: true, value: (i) => Math.abs(b[i] - a[i]), show: fmt });
      columns.push({ key: "outcome", label: "b is", num: false, value: (i) => word[cmp.o[i]], show: String });
    } else {
      for (const key of D.colsets[colset][1]) columns.push(metricColumn(key, 0));
    }
    const head = document.querySelector("#table thead");
    head.textContent = "";
    const tr = el("tr");
    for (const c of columns) {
      const th = el("th", c.num ? "num" : "", el("button", "", c.label));
      th.dataset.key = c.key;
      th.setAttribute("aria-sort", c.key === state.sortKey ? (state.desc ? "descending" : "ascending") : "none");
      th.firstChild.type = "button";
      th.firstChild.addEventListener("click", () => sortBy(c.key));
      tr.append(th);
    }
    head.append(tr);
  }

  // ------------------------------------------------------------------ table state
  const state = { sortKey: cmp ? "moved" : null, desc: true, page: 0, size: Number($("page-size").value) || 25, filter: "", rows: [] };
  let lowerTexts = null;

  function matcher(text) {
    const m = /^\s*([^<>=!\s]+)\s*(<=|>=|==|!=|<|>|=)\s*(-?[0-9.]+(?:e-?[0-9]+)?)\s*$/i.exec(text);
    const col = m && columns.find((c) => c.key === m[1] && c.num);
    if (col) {
      const x = parseFloat(m[3]), op = m[2];
      return (i) => {
        const v = col.value(i);
        if (v === null || v === undefined) return false;
        return op === "<" ? v < x : op === "<=" ? v <= x : op === ">" ? v > x
          : op === ">=" ? v >= x : op === "!=" ? v !== x : v === x;
      };
    }
    const needle = text.trim().toLowerCase();
    if (!needle) return null;
    if (!lowerTexts) lowerTexts = D.ids.map((id, i) => (id + "\n" + ((D.texts && D.texts[i]) || "")).toLowerCase());
    return (i) => lowerTexts[i].includes(needle);
  }

  function refresh() {
    const keep = matcher(state.filter);
    let rows = [];
    for (let i = 0; i < N; i++) if (!keep || keep(i)) rows.push(i);
    const col = columns.find((c) => c.key === state.sortKey);
    if (col) {
      const v = rows.map((i) => col.value(i));
      const pos = new Map(rows.map((r, j) => [r, j]));
      const dir = state.desc ? -1 : 1;
      rows.sort((x, y) => {
        const a = v[pos.get(x)], b = v[pos.get(y)];
        const na = a === null || a === undefined || Number.isNaN(a), nb = b === null || b === undefined || Number.isNaN(b);
        if (na || nb) return na === nb ? x - y : na ? 1 : -1; // missing values last
        const c = col.num ? a - b : collator.compare(String(a), String(b));
        return c !== 0 ? dir * c : x - y;
      });
    }
    state.rows = rows;
    $("count").dataset.filter = state.filter; // what the rows shown were filtered by
    state.page = Math.min(state.page, Math.max(0, Math.ceil(rows.length / state.size) - 1));
    draw();
  }

  function draw() {
    const body = document.querySelector("#table tbody");
    const start = state.page * state.size, rows = state.rows.slice(start, start + state.size);
    const frag = document.createDocumentFragment();
    for (const i of rows) {
      const tr = el("tr");
      tr.dataset.i = i;
      tr.tabIndex = 0;
      if (i === selected) tr.className = "selected";
      for (const c of columns) {
        const v = c.value(i);
        const td = el("td", c.num ? "num" : c.text ? "text" : "", c.show(v));
        if (c.text && v) td.title = v.length > 300 ? v.slice(0, 300) + "\u2026" : v;
        if (c.cls) td.className += " " + c.cls(v);
        tr.append(td);
      }
      frag.append(tr);
    }
    body.textContent = "";
    body.append(frag);
    const total = state.rows.length, pages = Math.max(1, Math.ceil(total / state.size));
    $("count").textContent = total === N ? `${N} rows` : `${total} of ${N} rows match`;
    $("page-info").textContent = total ? `rows ${start + 1}\u2013${start + rows.length} of ${total} \u00b7 page ${state.page + 1} of ${pages}` : "no rows";
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
  }

  function sortBy(key) {
    if (state.sortKey === key) state.desc = !state.desc;
    else { state.sortKey = key; state.desc = columns.find((c) => c.key === key).num; }
    for (const th of document.querySelectorAll("#table th")) {
      th.setAttribute("aria-sort", th.dataset.key === key ? (state.desc ? "descending" : "ascending") : "none");
    }
    state.page = 0;
    refresh();
  }

  // ------------------------------------------------------------------ drill-down
  let selected = -1;

  function scoreChips(sys, i) {
    // metric x cut-off keys ("ndcg@10") as a small grid; any other key as a chip
    const s = D.systems[sys], names = [], ks = [], cell = new Map(), box = el("div", "chips");
    for (const key of s.keys) {
      const m = /^(.+)@(\d+)$/.exec(key), v = s.scores[key][i];
      if (!m) { box.append(el("span", "chip", `${key} ${fmt(v)}`)); continue; }
      if (!names.includes(m[1])) names.push(m[1]);
      if (!ks.includes(Number(m[2]))) ks.push(Number(m[2]));
      cell.set(key, v);
    }
    if (!names.length) return box;
    ks.sort((x, y) => x - y);
    const table = el("table", "scores"), head = el("tr", "", el("th", "", "metric"));
    ks.forEach((k) => head.append(el("th", "", `@${k}`)));
    table.append(head);
    for (const name of names) {
      const tr = el("tr", "", el("th", "", name));
      ks.forEach((k) => tr.append(el("td", "", cell.has(`${name}@${k}`) ? fmt(cell.get(`${name}@${k}`)) : "")));
      table.append(tr);
    }
    return el("div", "", el("div", "table-wrap", table), box);
  }

  function gradeBadge(g) {
    if (g === null || g === undefined) return el("span", "grade unjudged", D.hasQrels ? "unjudged" : "grade ?");
    return el("span", relevant(g) ? "grade rel" : "grade nonrel", `grade ${g}`);
  }

  function docLine(doc, g, rank, note) {
    const li = el("li", relevant(g) ? "relevant" : "", el("span", "rank", rank === null ? "\u2013" : `${rank}.`),
      el("span", "doc", D.docs[doc]), gradeBadge(g), note ? el("span", "muted", note) : null);
    const snip = D.snips && D.snips[doc];
    if (snip) li.append(el("span", "snip", snip));
    return li;
  }

  function rankingBody(sys, i) {
    const box = el("div");
    const det = D.detail && D.detail[sys] ? D.detail[sys][i] : null;
    if (!det) {
      box.append(el("p", "muted", "No run was given, so the ranking is not shown (pass run= to write_retrieval_report, or --run)."));
      return box;
    }
    if (det.x) box.append(el("p", "note", "The run has no ranking for this query: it scores 0 (or is left out of the mean under missing_queries=\"skip\")."));
    if (det.r) {
      box.append(el("h4", "", `Ranking: top ${det.r.length} of ${det.n}`));
      const ol = el("ol", "ranked");
      det.r.forEach((doc, j) => ol.append(docLine(doc, det.g[j], j + 1)));
      box.append(ol);
    }
    if (det.m && det.m.length) {
      box.append(el("h4", "", det.r ? `Relevant documents not in the top ${det.r.length}` : "Relevant documents"));
      const ul = el("ol", "ranked");
      for (const [doc, g, rank] of det.m) ul.append(docLine(doc, g, rank, rank === null ? "not retrieved" : null));
      box.append(ul);
    }
    return box;
  }

  function findClaim(text, claim, from) {
    let at = text.indexOf(claim, from);
    if (at >= 0) return [at, at + claim.length];
    const words = claim.trim().split(/\s+/).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    if (!words.length || !words[0]) return null;
    const re = new RegExp(words.join("\\s+"), "ig");
    re.lastIndex = from;
    const m = re.exec(text);
    return m ? [m.index, m.index + m[0].length] : null;
  }

  function highlighted(text, unsupported, supported) {
    const spans = [], lost = [];
    for (const [claims, cls] of [[unsupported, "unsupported"], [supported, "supported"]]) {
      for (const claim of claims || []) {
        let at = findClaim(text, claim, 0);
        while (at && spans.some((s) => at[0] < s[1] && s[0] < at[1])) at = findClaim(text, claim, at[1]);
        if (at) spans.push([at[0], at[1], cls, claim]); else if (cls === "unsupported") lost.push(claim);
      }
    }
    spans.sort((x, y) => x[0] - y[0]);
    const out = el("div", "answer");
    let pos = 0;
    for (const [s, e, cls, claim] of spans) {
      out.append(text.slice(pos, s));
      const mark = el("mark", cls, text.slice(s, e));
      mark.title = cls === "unsupported" ? "unsupported claim: not found in the contexts" : "supported claim";
      out.append(mark);
      pos = e;
    }
    out.append(text.slice(pos));
    return [out, lost];
  }

  function ragBody(sys, i) {
    const box = el("div");
    const det = D.detail && D.detail[sys] ? D.detail[sys][i] : null;
    if (!det) {
      box.append(el("p", "muted", "No sample was given for this row (pass samples= to write_rag_report)."));
      return box;
    }
    if (det.err) box.append(el("p", "note", `Pipeline error: ${det.err}`));
    box.append(el("h4", "", "Answer"));
    if (det.a !== null && det.a !== undefined) {
      const [answer, lost] = highlighted(det.a, det.un, det.su);
      box.append(answer);
      if ((det.un || []).length) {
        box.append(el("p", "muted legend", el("mark", "unsupported", "unsupported claim"), " ",
          el("mark", "supported", "supported claim"), " (faithfulness' lexical check of each claim against the contexts)"));
      }
      if (lost.length) {
        const ul = el("ul");
        lost.forEach((c) => ul.append(el("li", "", el("mark", "unsupported", c))));
        box.append(el("p", "muted", "Unsupported claims not located in the shown answer:"), ul);
      }
    } else if ((det.un || []).length) {
      const ul = el("ul");
      det.un.forEach((c) => ul.append(el("li", "", el("mark", "unsupported", c))));
      box.append(el("p", "muted", "no answer text; unsupported claims:"), ul);
    } else box.append(el("p", "muted", "no answer"));
    if (det.ref && det.ref.length) {
      box.append(el("h4", "", det.ref.length > 1 ? "References" : "Reference"));
      det.ref.forEach((r) => box.append(el("div", "ref", r)));
    }
    if (det.ctx && det.ctx.length) {
      box.append(el("h4", "", `Retrieved contexts (${det.nctx})`));
      const ol = el("ol", "ctx-list");
      det.ctx.forEach((c) => ol.append(el("li", "ctx", c)));
      box.append(ol);
      if (det.nctx > det.ctx.length) box.append(el("p", "muted", `${det.nctx - det.ctx.length} more not shown`));
    }
    if (det.rid && det.rid.length) {
      box.append(el("h4", "", "Retrieved ids"));
      const ol = el("ol", "ranked");
      det.rid.forEach((id, j) => {
        const g = det.rg ? det.rg[j] : null;
        ol.append(el("li", relevant(g) ? "relevant" : "", el("span", "rank", `${j + 1}.`), el("span", "doc", id),
          det.rg ? gradeBadge(g) : null));
      });
      box.append(ol);
    }
    if (det.more) {
      const dl = el("dl", "conv");
      for (const [k, v] of Object.entries(det.more)) dl.append(el("dt", "", k), el("dd", "", v));
      box.append(el("h4", "", "Details"), dl);
    }
    return box;
  }

  function open(i) {
    if (i < 0 || i >= N) return;
    selected = i;
    for (const tr of document.querySelectorAll("#table tbody tr")) tr.classList.toggle("selected", Number(tr.dataset.i) === i);
    for (const c of document.querySelectorAll("svg.scatter circle.on")) c.classList.remove("on");
    const dot = document.querySelector(`svg.scatter circle[data-i="${i}"]`);
    if (dot) dot.classList.add("on");
    const box = $("drill");
    box.textContent = "";
    const close = el("button", "close", "Close");
    close.type = "button";
    close.addEventListener("click", () => { box.hidden = true; selected = -1; draw(); });
    box.append(close, el("h2", "", `${D.mode === "rag" ? "Sample" : "Query"} ${D.ids[i]}`));
    if (D.texts && D.texts[i] !== null) box.append(el("div", "qtext", D.texts[i]));
    const body = D.mode === "rag" ? ragBody : rankingBody;
    if (cmp) {
      const a = D.systems[0].scores[cmp.metric][i], b = D.systems[1].scores[cmp.metric][i];
      box.append(el("p", "", `${cmp.metric}: ${D.systems[0].label} ${fmt(a)} \u2192 ${D.systems[1].label} ${fmt(b)} (${signed(b - a)})`));
      const sides = el("div", "sides");
      ["a", "b"].forEach((side, s) => {
        sides.append(el("div", "side " + side, el("h3", "", D.systems[s].label), scoreChips(s, i), body(s, i)));
      });
      box.append(sides);
    } else {
      box.append(scoreChips(0, i), body(0, i));
    }
    box.hidden = false;
    history.replaceState(null, "", "#item=" + encodeURIComponent(D.ids[i]));
  }

  // ------------------------------------------------------------------ wiring
  function init() {
    if (!cmp && D.colsets.length > 1) {
      const sel = $("colset");
      D.colsets.forEach(([label], j) => { const o = el("option", "", label); o.value = j; sel.append(o); });
      sel.value = D.col;
      $("colset-label").hidden = false;
      sel.addEventListener("change", () => { setColumns(Number(sel.value)); refresh(); });
    }
    setColumns(cmp ? 0 : D.col);
    let timer = 0;
    $("filter").addEventListener("input", (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { state.filter = e.target.value; state.page = 0; refresh(); }, 120);
    });
    $("page-size").addEventListener("change", (e) => { state.size = Number(e.target.value); state.page = 0; draw(); });
    $("prev").addEventListener("click", () => { state.page--; draw(); });
    $("next").addEventListener("click", () => { state.page++; draw(); });
    const body = document.querySelector("#table tbody");
    const pick = (e) => { const tr = e.target.closest("tr"); if (tr) { open(Number(tr.dataset.i)); $("drill").scrollIntoView({ block: "nearest" }); } };
    body.addEventListener("click", pick);
    body.addEventListener("keydown", (e) => { if (e.key === "Enter") pick(e); });
    for (const b of document.querySelectorAll("button.item-link")) {
      b.addEventListener("click", () => { const i = idIndex.get(b.dataset.item); if (i !== undefined) { open(i); $("drill").scrollIntoView(); } });
    }
    const points = document.querySelector("svg.scatter .points");
    if (points) {
      const tip = $("tip");
      points.addEventListener("click", (e) => { const i = e.target.dataset.i; if (i !== undefined) { open(Number(i)); $("drill").scrollIntoView(); } });
      points.addEventListener("mouseover", (e) => {
        const i = Number(e.target.dataset.i);
        if (Number.isNaN(i)) return;
        const a = D.systems[0].scores[cmp.metric][i], b = D.systems[1].scores[cmp.metric][i];
        tip.textContent = `${D.ids[i]}: ${fmt(a)} \u2192 ${fmt(b)}` + (D.texts && D.texts[i] ? ` \u2014 ${D.texts[i].slice(0, 120)}` : "");
        tip.style.left = e.clientX + 12 + "px";
        tip.style.top = e.clientY + 12 + "px";
        tip.hidden = false;
      });
      points.addEventListener("mouseout", () => { tip.hidden = true; });
    }
    refresh();
    const hash = /^#item=(.*)$/.exec(location.hash);
    if (hash) { const i = idIndex.get(decodeURIComponent(hash[1])); if (i !== undefined) open(i); }
    document.documentElement.dataset.ready = "1";
    performance.mark("ragmeter-ready");
  }
  init();
})();
