// toolwire's debug page: draws GET machine and GET requests (the JSON routes beside this file),
// polls them while the tab is visible, and walks one request's path through the diagram.
// Model text is untrusted: it reaches the page only as text nodes (textContent), never as markup.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;
const NODE_W = 156, NODE_H = 46;          // a state's box
const COLUMN = 330, ROW = 190;            // distance between state columns and rows
const LEFT = 140, TOP = 140;              // where the first state sits (room for the start dot and arcs)

const page = {
  machine: null, requests: [], etags: {},
  selected: null, view: null, choice: 0, step: 0,
  edges: new Map(), states: new Map(),   // drawn elements by "source|trigger|dest" and by state name
};

// -- small DOM helpers ------------------------------------------------------------------------

/** An HTML element; string children become text nodes. */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children);
  return node;
}

/** An SVG element with attributes and optional text. */
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

const $ = (id) => document.getElementById(id);
const edgeKey = (e) => `${e.source}|${e.trigger}|${e.dest}`;

// -- fetching -----------------------------------------------------------------------------------

/** GET a JSON route; with ``tagged``, null when it has not changed since the last time (ETag). */
async function getJSON(url, tagged = false) {
  const headers = tagged && page.etags[url] ? {"If-None-Match": page.etags[url]} : {};
  // Resolved against the page without any user:key@ in its address (fetch refuses those); the browser
  // still sends the Basic credentials it holds for this place.
  const address = new URL(url, location.origin + location.pathname);
  const response = await fetch(address, {headers, cache: "no-store", credentials: "same-origin"});
  if (response.status === 304) return null;
  if (!response.ok) {
    const error = new Error(`${url}: HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  if (tagged) page.etags[url] = response.headers.get("ETag");
  return response.json();
}

async function refresh() {
  try {
    const list = await getJSON("requests", true);
    if (list) {
      page.requests = list.data;
      page.machine = await getJSON("machine");
      drawMachine();
      renderRequests();
      if (page.selected === null && page.requests.length) await select(page.requests[0].request_id);
      else highlightPath();
    }
    if (!page.upstreams) renderUpstreams(page.upstreams = (await getJSON("upstreams")).data);
    setStatus(`live · ${page.requests.length} requests kept · checked ${clock(Date.now() / 1000)}`);
  } catch (error) {
    setStatus(`cannot reach toolwire (${error.message}); retrying`, true);
  }
}

function setStatus(text, bad = false) {
  $("status").textContent = text;
  $("status").classList.toggle("bad", bad);
}

/** Poll while someone looks: a hidden tab asks the server nothing. */
async function poll() {
  if (!document.hidden) await refresh();
  setTimeout(poll, POLL_MS);
}

// -- the diagram ------------------------------------------------------------------------------

/** Where each state goes: non-terminal states in a row by distance from the initial one, terminal ones below. */
function layout(machine) {
  const next = new Map(machine.states.map((s) => [s.name, []]));
  for (const e of machine.edges) next.get(e.source).push(e.dest);
  const rank = new Map([[machine.initial, 0]]);
  const queue = [machine.initial];
  while (queue.length) {
    const state = queue.shift();
    for (const dest of next.get(state)) {
      if (!rank.has(dest)) { rank.set(dest, rank.get(state) + 1); queue.push(dest); }
    }
  }
  const order = (s) => rank.has(s.name) ? rank.get(s.name) : Infinity;
  const top = machine.states.filter((s) => !s.terminal).sort((a, b) => order(a) - order(b));
  const bottom = machine.states.filter((s) => s.terminal);
  const at = new Map();
  top.forEach((s, i) => at.set(s.name, {x: LEFT + i * COLUMN, y: TOP}));
  const middle = LEFT + (top.length - 1) * COLUMN / 2;
  bottom.forEach((s, i) => at.set(s.name, {x: middle + (i - (bottom.length - 1) / 2) * COLUMN, y: TOP + ROW}));
  return {at, width: LEFT * 2 + (top.length - 1) * COLUMN, height: TOP + (bottom.length ? ROW : 0) + NODE_H};
}

/** An edge as a quadratic curve: start, control and end points, and where its label sits. */
function curve(a, b, hasReverse) {
  const sameRow = a.y === b.y;
  let p0, p2, control;
  if (sameRow) {
    const columns = Math.round(Math.abs(b.x - a.x) / COLUMN);
    const forward = b.x > a.x;
    if (columns > 1) {  // a long jump arcs over the states between
      p0 = {x: a.x, y: a.y - NODE_H / 2};
      p2 = {x: b.x, y: b.y - NODE_H / 2};
      control = {x: (a.x + b.x) / 2, y: a.y - NODE_H / 2 - 70 - 40 * columns};
    } else {  // neighbours: forward above the middle line, backward below it
      const dy = forward ? -9 : 9, side = forward ? 1 : -1;
      p0 = {x: a.x + side * NODE_W / 2, y: a.y + dy};
      p2 = {x: b.x - side * NODE_W / 2, y: b.y + dy};
      control = {x: (p0.x + p2.x) / 2, y: a.y + dy + (hasReverse || forward ? 4 * dy : 0)};
    }
  } else {  // between rows: leave the bottom (or top) edge, leaning toward the other state
    const down = b.y > a.y ? 1 : -1;
    const lean = (other, self) => Math.max(-NODE_W / 3, Math.min(NODE_W / 3, (other - self) * 0.25));
    p0 = {x: a.x + lean(b.x, a.x), y: a.y + down * NODE_H / 2};
    p2 = {x: b.x + lean(a.x, b.x), y: b.y - down * NODE_H / 2};
    const bend = hasReverse ? 30 : 0;
    control = {x: (p0.x + p2.x) / 2 + bend, y: (p0.y + p2.y) / 2};
  }
  const label = {x: 0.25 * p0.x + 0.5 * control.x + 0.25 * p2.x, y: 0.25 * p0.y + 0.5 * control.y + 0.25 * p2.y};
  return {p0, control, p2, label};
}

/** How hot an edge is drawn: grey when it never fired, amber to red as it nears the busiest edge. */
function heat(count, max) {
  if (!count) return {color: "#c3cad5", width: 1.5};
  const r = count / max;
  return {color: `hsl(${42 - 42 * r}, 88%, ${52 - 10 * r}%)`, width: 2 + 4 * r};
}

function arrowhead(c, color) {
  const dx = c.p2.x - c.control.x, dy = c.p2.y - c.control.y;
  const length = Math.hypot(dx, dy) || 1;
  const ux = dx / length, uy = dy / length, size = 11;
  const back = {x: c.p2.x - ux * size, y: c.p2.y - uy * size};
  const points = [[c.p2.x, c.p2.y], [back.x - uy * size / 2, back.y + ux * size / 2],
                  [back.x + uy * size / 2, back.y - ux * size / 2]];
  return svg("polygon", {points: points.map((p) => p.join(",")).join(" "), fill: color, class: "arrow"});
}

function drawMachine() {
  const machine = page.machine;
  const {at, width, height} = layout(machine);
  const root = $("diagram");
  root.replaceChildren();
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  page.edges.clear();
  page.states.clear();
  const max = Math.max(1, ...machine.edges.map((e) => e.count));
  const pairs = new Set(machine.edges.map((e) => `${e.source}|${e.dest}`));
  const edgeLayer = svg("g"), labelLayer = svg("g");

  for (const e of machine.edges) {
    const c = curve(at.get(e.source), at.get(e.dest), pairs.has(`${e.dest}|${e.source}`));
    const d = `M${c.p0.x},${c.p0.y} Q${c.control.x},${c.control.y} ${c.p2.x},${c.p2.y}`;
    const {color, width: stroke} = heat(e.count, max);
    const group = svg("g", {class: e.count ? "edge" : "edge idle", "data-source": e.source,
                            "data-trigger": e.trigger, "data-dest": e.dest, "data-count": e.count});
    group.append(svg("title", {}, `${e.source} → ${e.dest} on ${e.trigger}: ${e.observed}; fired ${e.count}×`),
                 svg("path", {d, class: "halo"}), svg("path", {d, class: "line", stroke: color, "stroke-width": stroke}),
                 arrowhead(c, color));
    edgeLayer.append(group);
    const label = svg("g", {class: "edge-label", transform: `translate(${c.label.x},${c.label.y})`});
    const digits = String(e.count).length;
    const below = c.control.y > (c.p0.y + c.p2.y) / 2 + 1;  // a curve bending down gets its name underneath
    const name = svg("text", {class: "trigger", y: below ? 23 : -13});
    name.append(svg("tspan", {}, e.trigger), svg("tspan", {class: "step-numbers", dx: 6}));
    label.append(name,
                 svg("rect", {class: "count-pill", x: -9 - 4 * digits, y: -9, width: 18 + 8 * digits, height: 18,
                              rx: 9, fill: color}),
                 svg("text", {class: "count", y: 4}, String(e.count)));
    labelLayer.append(label);
    page.edges.set(edgeKey(e), {group, label});
  }

  const stateLayer = svg("g");
  for (const s of machine.states) {
    const p = at.get(s.name);
    const group = svg("g", {class: s.terminal ? "state terminal" : "state", "data-state": s.name,
                            transform: `translate(${p.x},${p.y})`});
    group.append(svg("rect", {x: -NODE_W / 2, y: -NODE_H / 2, width: NODE_W, height: NODE_H, rx: 12}));
    if (s.terminal) group.append(svg("rect", {class: "inner", x: -NODE_W / 2 + 4, y: -NODE_H / 2 + 4,
                                               width: NODE_W - 8, height: NODE_H - 8, rx: 9}));
    group.append(svg("text", {y: 5}, s.name));
    stateLayer.append(group);
    page.states.set(s.name, group);
  }
  const start = at.get(machine.initial);
  stateLayer.append(svg("circle", {class: "start", cx: start.x - NODE_W / 2 - 52, cy: start.y, r: 7}),
                    svg("path", {class: "start-line", d: `M${start.x - NODE_W / 2 - 45},${start.y} H${start.x - NODE_W / 2 - 10}`}),
                    svg("polygon", {class: "start-arrow", points: `${start.x - NODE_W / 2},${start.y} ${start.x - NODE_W / 2 - 11},${start.y - 5} ${start.x - NODE_W / 2 - 11},${start.y + 5}`}));
  root.append(edgeLayer, stateLayer, labelLayer);
  $("machine-caption").textContent = `edges fired across the ${machine.requests} kept requests`;
  $("heat-max").textContent = `0 … ${max}`;
}

/** Mark the chosen choice's path on the diagram: every edge it took with its step numbers, the current step bold. */
function highlightPath() {
  for (const {group, label} of page.edges.values()) {
    group.classList.remove("taken", "current");
    label.classList.remove("taken", "current");
    label.querySelector(".step-numbers").textContent = "";
  }
  for (const node of page.states.values()) node.classList.remove("visited", "active");
  const path = currentChoice()?.path ?? [];
  const numbers = new Map();
  path.forEach((step, i) => {
    const key = edgeKey(step);
    numbers.set(key, [...(numbers.get(key) ?? []), i + 1]);
    page.states.get(step.source)?.classList.add("visited");
    page.states.get(step.dest)?.classList.add("visited");
  });
  for (const [key, steps] of numbers) {
    const drawn = page.edges.get(key);
    if (!drawn) continue;  // an edge the table no longer has
    drawn.group.classList.add("taken");
    drawn.label.classList.add("taken");
    drawn.label.querySelector(".step-numbers").textContent = steps.map((n) => `#${n}`).join(" ");
  }
  const step = path[page.step];
  if (step) {
    const drawn = page.edges.get(edgeKey(step));
    drawn?.group.classList.add("current");
    drawn?.label.classList.add("current");
    page.states.get(step.dest)?.classList.add("active");
  }
}

// -- the request list ---------------------------------------------------------------------------

const troubled = (r) => (r.tool_calls?.rejected ?? 0) + (r.tool_calls?.repaired ?? 0) > 0;

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], {hour12: false});
}

function callBadges(counts = {}) {
  const cell = h("td", {className: "calls-cell"}, String(counts.emitted ?? 0));
  for (const outcome of ["repaired", "rejected", "failed"]) {
    if (counts[outcome]) cell.append(" ", h("span", {className: `badge ${outcome}`}, `${counts[outcome]} ${outcome}`));
  }
  return cell;
}

function renderRequests() {
  const routeSelect = $("filter-route");
  const chosenRoute = routeSelect.value;
  const routes = [...new Set(page.requests.map((r) => r.route))].sort();
  routeSelect.replaceChildren(h("option", {value: ""}, "all"), ...routes.map((r) => h("option", {value: r}, r)));
  routeSelect.value = routes.includes(chosenRoute) ? chosenRoute : "";

  const status = $("filter-status").value, route = routeSelect.value, onlyTroubled = $("filter-troubled").checked;
  const shown = page.requests.filter((r) => (!status || String(r.status).startsWith(status))
    && (!route || r.route === route) && (!onlyTroubled || troubled(r)));
  const rows = shown.map((r) => {
    const row = h("tr", {"data-request-id": r.request_id, tabIndex: 0},
      h("td", {title: new Date(r.started_at * 1000).toISOString()}, clock(r.started_at),
        h("div", {className: "sub id", title: r.request_id}, r.request_id)),
      h("td", {title: `${r.method} ${r.route}`}, r.route, h("div", {className: "sub"}, r.model ?? "—")),
      h("td", {}, h("span", {className: `http s${String(r.status)[0]}xx`}, String(r.status))),
      callBadges(r.tool_calls),
      h("td", {className: "num"}, (r.duration_ms ?? 0).toFixed(1)));
    row.classList.toggle("selected", r.request_id === page.selected);
    row.addEventListener("click", () => select(r.request_id));
    row.addEventListener("keydown", (event) => { if (event.key === "Enter") select(r.request_id); });
    return row;
  });
  $("requests").tBodies[0].replaceChildren(...rows);
  $("requests-empty").hidden = rows.length > 0;
  $("requests-caption").textContent = `${shown.length} of ${page.requests.length}, newest first`;
}

/** The back ends and the models routed to each (the settings' routing table), and a pool member's state as the
 * worker that answered saw it when the page opened. */
function renderUpstreams(upstreams) {
  $("upstreams").tBodies[0].replaceChildren(...upstreams.map((u) => h("tr", {},
    h("td", {}, u.name), h("td", {}, u.kind), h("td", {className: "sub"}, u.url || "—"),
    h("td", {}, u.models.join(", ") || "—"), h("td", {}, u.pool || "—"))));
}

// -- one request ------------------------------------------------------------------------------

const currentChoice = () => page.view?.choices[page.choice];

async function select(requestId) {
  page.selected = requestId;
  for (const row of $("requests").tBodies[0].rows) row.classList.toggle("selected", row.dataset.requestId === requestId);
  try {
    const view = await getJSON(`requests/${encodeURIComponent(requestId)}`);
    if (page.selected !== requestId) return;  // another click won meanwhile
    page.view = view;
    page.choice = 0;
    page.step = 0;
  } catch (error) {
    page.view = null;
    $("detail-caption").textContent = error.status === 404 ? `${requestId}: no longer kept` : error.message;
    $("detail").hidden = true;
    highlightPath();
    return;
  }
  renderDetail();
}

function renderDetail() {
  const view = page.view;
  $("detail").hidden = false;
  $("detail-caption").textContent = view.request_id;
  const facts = [["route", `${view.method} ${view.route}`], ["model", view.model ?? "—"], ["back end", view.upstream ?? "—"],
                 ["status", String(view.status)],
                 ["stream", view.stream ? "yes" : "no"], ["started", new Date(view.started_at * 1000).toLocaleString()],
                 ["duration", `${(view.duration_ms ?? 0).toFixed(1)} ms`
                              + (view.ttfb_ms == null ? "" : ` (first byte after ${view.ttfb_ms.toFixed(1)} ms)`)],
                 ["tool calls", Object.entries(view.tool_calls ?? {}).map(([k, n]) => `${n} ${k}`).join(", ") || "none"]];
  $("detail-summary").replaceChildren(...facts.flatMap(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
  $("choice-tabs").replaceChildren(...view.choices.map((choice, i) => {
    const tab = h("button", {type: "button", className: i === page.choice ? "tab current" : "tab"}, `choice ${choice.index}`);
    tab.addEventListener("click", () => { page.choice = i; page.step = 0; renderDetail(); });
    return tab;
  }));
  $("choice-tabs").hidden = view.choices.length < 2;
  renderChoice();
}

function renderChoice() {
  const choice = currentChoice();
  const path = choice?.path ?? [];
  $("steps").replaceChildren(...path.map((step, i) => {
    const item = h("li", {"data-step": i, className: i === page.step ? "step current" : "step"},
      h("div", {className: "move"}, h("span", {className: "num"}, String(i + 1)),
        h("span", {className: "from"}, step.source), " → ", h("span", {className: "to"}, step.dest),
        h("span", {className: "trigger"}, step.trigger),
        h("span", {className: "at", title: "since the request arrived"}, step.at_ms == null ? "" : `${step.at_ms.toFixed(1)} ms`)),
      step.text ? h("pre", {className: "span", title: `characters ${step.span[0]}–${step.span[1]} of the model text`}, step.text)
                : h("p", {className: "span none"}, "no model text (a native call or the upstream's finish)"));
    item.addEventListener("click", () => setStep(i));
    return item;
  }));
  if (!path.length) $("steps").append(h("li", {className: "empty"}, choice ? "no transitions" : "no choices (the request ended before the model)"));

  $("finish-reason").textContent = choice?.finish_reason ?? "—";
  const reasoning = choice?.reasoning ?? [];
  $("reasoning").replaceChildren(...reasoning.map((span) => h("li", {},
    h("div", {}, `before step ${span.step + 1}`, " ",
      h("span", {className: "at", title: "since the request arrived"}, `${span.at_ms.toFixed(1)} ms`)),
    h("pre", {className: "arguments"}, span.text))));
  if (!reasoning.length) $("reasoning").append(h("li", {className: "empty"}, "none"));
  const calls = choice?.calls ?? [];
  $("calls").replaceChildren(...calls.map((call) => h("li", {},
    h("div", {}, h("strong", {}, call.name), ` #${call.index} `, h("code", {}, call.call_id), " ",
      h("span", {className: call.valid ? "badge ok" : "badge failed"}, call.valid ? "valid" : "invalid"),
      call.kind && call.kind !== "function" ? h("span", {className: "badge"}, call.kind) : ""),
    h("pre", {className: "arguments"}, call.arguments))));
  if (!calls.length) $("calls").append(h("li", {className: "empty"}, "none"));
  const notes = choice?.notes ?? [];
  $("notes").replaceChildren(...notes.map((note) => h("li", {},
    h("span", {className: `badge ${note.kind}`}, note.kind), " ",
    note.index === null ? "a block that never became a call" : `call #${note.index} ${note.name ?? ""}`, ": ",
    h("span", {className: "message"}, note.message))));
  if (!notes.length) $("notes").append(h("li", {className: "empty"}, "none"));
  highlightPath();
}

function setStep(i) {
  const path = currentChoice()?.path ?? [];
  if (!path.length) return;
  page.step = Math.max(0, Math.min(path.length - 1, i));
  for (const item of $("steps").children) item.classList.toggle("current", Number(item.dataset.step) === page.step);
  scrollIntoList($("steps"), $("steps").children[page.step]);
  highlightPath();
}

/** Scroll ``list`` (not the page) just enough to show ``item``. */
function scrollIntoList(list, item) {
  if (!item) return;
  if (item.offsetTop < list.scrollTop) list.scrollTop = item.offsetTop;
  const bottom = item.offsetTop + item.offsetHeight - list.clientHeight;
  if (bottom > list.scrollTop) list.scrollTop = bottom;
}

// -- start ------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["filter-status", "filter-route", "filter-troubled"]) $(id).addEventListener("change", renderRequests);
  $("step-back").addEventListener("click", () => setStep(page.step - 1));
  $("step-next").addEventListener("click", () => setStep(page.step + 1));
  document.addEventListener("keydown", (event) => {
    if (event.target.closest?.("select, input")) return;
    if (event.key === "ArrowRight") setStep(page.step + 1);
    if (event.key === "ArrowLeft") setStep(page.step - 1);
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  poll();
});
