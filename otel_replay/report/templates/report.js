// The report's viewer: a virtual timeline of rows (a run's steps, or two runs' aligned
// pairs) and the pane of the selected row, drawn on demand from the page's JSON document.
// Content is only ever set as text (textContent), never parsed as markup.
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("report-data").textContent);
  var contents = data.contents;
  var steps = data.steps;
  var rows = data.rows;
  var ROW = 26; // px, the height of one timeline row (report.css .row)
  var OVERSCAN = 12;
  var BODY_LIMIT = 200000; // characters of a body drawn before "show all"
  var WINDOW = 80; // characters of context around a changed part of a value
  var WORD = /\w/;

  var timeline = document.getElementById("timeline");
  var spacer = document.getElementById("spacer");
  var pane = document.getElementById("pane");
  var filterBox = document.getElementById("filter");
  var count = document.getElementById("count");

  var shown = rows.map(function (_, i) { return i; }); // row ids passing the filter
  var selected = 0; // position in shown
  var texts = null; // per row, what the filter searches (made on first use)
  var maxDuration = 0;
  steps.forEach(function (s) { if (s.duration_ms > maxDuration) maxDuration = s.duration_ms; });

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      if (arguments[i]) parent.appendChild(arguments[i]);
    }
    return parent;
  }

  function ms(value) {
    if (value === null || value === undefined) return "";
    if (value >= 1000) return (value / 1000).toFixed(2) + " s";
    return value >= 10 ? Math.round(value) + " ms" : value.toFixed(1) + " ms";
  }

  function tokens(step) {
    if (step.tokens_in === null && step.tokens_out === null) return "";
    return (step.tokens_in === null ? "?" : step.tokens_in) + "→" +
      (step.tokens_out === null ? "?" : step.tokens_out);
  }

  var ENVELOPE = { tool: true, value: true, checkpoint: true };
  var SYSTEM = { system: true, developer: true };

  // ``200 incomplete httpx.RemoteProtocolError``: the code, whether a success was cut short,
  // and the error type unless it only repeats the code (an HTTP 404's is "404"). Capture
  // records every error response as not complete: for those, the code says it already.
  function status(step) {
    if (ENVELOPE[step.kind]) return step.error ? step.error : "ok";
    if (step.status === null) return step.error || "no response";
    var said = [String(step.status)];
    if (!step.complete && step.status < 400) said.push("incomplete");
    if (step.error && step.error !== said[0]) said.push(step.error);
    return said.join(" ");
  }

  function failed(step) {
    if (ENVELOPE[step.kind]) return Boolean(step.error);
    return Boolean(step.error) || step.status === null || step.status >= 400 || !step.complete;
  }

  // The step that names a row (A's, or B's when only B has it) and the other side's.
  function sides(row) {
    var a = row.a === null || row.a === undefined ? null : steps[row.a];
    var b = row.b === null || row.b === undefined ? null : steps[row.b];
    return { a: a, b: b, main: a || b };
  }

  function fork(row) {
    var s = sides(row);
    var marks = [s.a, s.b].filter(function (x) { return x && x.fork && x.fork !== "served"; });
    return marks.length ? marks[0].fork : null;
  }

  function statusWord(row) {
    if (!data.diff) return "";
    if (row.status === "changed") return "changed: " + row.fields.join(", ");
    if (row.status === "removed") return "only in A";
    if (row.status === "added") return "only in B";
    if (row.status === "inside") return "inside a served step";
    return row.status;
  }

  function rowText(id) {
    if (texts === null) {
      texts = rows.map(function (row) {
        var s = sides(row).main;
        return [s.kind, s.name, s.index, s.model || "", status(s), s.fidelity, s.fork || "",
          s.effect || "", statusWord(row)].join(" ").toLowerCase();
      });
    }
    return texts[id];
  }

  // ---- timeline ------------------------------------------------------------------------

  // What ``show`` says of a pair's steps: once when alike, ``A | B`` when not.
  function each(pair, show) {
    var said = pair.map(show);
    if (said.length < 2 || said[0] === said[1]) return said[0];
    return (said[0] || "–") + " | " + (said[1] || "–");
  }

  // A cell that may be cut short: its whole text is its title.
  function cell(className, text) {
    var node = el("span", className, text);
    if (text) node.title = text;
    return node;
  }

  function drawRow(position) {
    var id = shown[position];
    var row = rows[id];
    var s = sides(row);
    var step = s.main;
    var node = el("div", "row kind-" + step.kind);
    node.setAttribute("role", "option");
    node.dataset.row = String(id);
    node.style.top = position * ROW + "px";
    if (position === selected) {
      node.classList.add("selected");
      node.setAttribute("aria-selected", "true");
    }
    if (data.diff) node.classList.add("pair-" + row.status);
    var both = s.a && s.b ? [s.a, s.b] : [step];
    if (both.some(failed)) node.classList.add("failed");
    var index = data.diff
      ? (s.a ? s.a.index : "–") + " " + (s.b ? s.b.index : "–")
      : String(step.index);
    var name = el("span", "name");
    name.style.paddingLeft = step.depth * 14 + "px";
    if (step.depth) add(name, el("span", "nest", "└ "));
    add(name, el("span", "label", step.name));
    var mark = fork(row);
    if (mark) {
      // A file's directories say little and take the label's room: cut, whole on hover.
      var badge = el("span", "badge fork", mark.replace(/@(?:[^\s@]*\/)+(?=[^\/\s])/g, "@…/"));
      badge.title = mark;
      add(name, badge);
    }
    if (step.effect) add(name, el("span", "badge effect-" + step.effect, step.effect));
    name.title = [step.name, mark, step.effect].filter(Boolean).join("  ·  ");
    var bar = el("span", "bar");
    var fill = el("span", "fill");
    fill.style.width = maxDuration ? Math.max(1, (100 * step.duration_ms) / maxDuration) + "%" : "0";
    add(bar, fill);
    add(node,
      el("span", "index", index),
      el("span", "kind", step.kind),
      name,
      data.diff ? cell("diff", statusWord(row)) : null,
      el("span", "fidelity fidelity-" + step.fidelity, step.fidelity),
      cell("status", each(both, status)),
      cell("tokens", each(both, tokens)),
      el("span", "duration", ms(step.duration_ms)),
      data.diff ? null : bar);
    node.addEventListener("click", function () { select(position, false); });
    return node;
  }

  function drawTimeline() {
    var first = Math.max(0, Math.floor(timeline.scrollTop / ROW) - OVERSCAN);
    var last = Math.min(shown.length,
      Math.ceil((timeline.scrollTop + timeline.clientHeight) / ROW) + OVERSCAN);
    var fragment = document.createDocumentFragment();
    for (var p = first; p < last; p++) fragment.appendChild(drawRow(p));
    var old = timeline.querySelectorAll(".row");
    for (var i = 0; i < old.length; i++) old[i].remove();
    timeline.appendChild(fragment);
    var total = rows.length;
    var noun = data.diff ? "aligned steps" : total === 1 ? "step" : "steps";
    count.textContent = shown.length === total
      ? total + " " + noun
      : shown.length + " of " + total + " " + noun;
  }

  var pending = false;
  timeline.addEventListener("scroll", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; drawTimeline(); });
  });

  function reveal(position) {
    var top = position * ROW;
    if (top < timeline.scrollTop) timeline.scrollTop = top;
    else if (top + ROW > timeline.scrollTop + timeline.clientHeight) {
      timeline.scrollTop = top + ROW - timeline.clientHeight;
    }
  }

  function select(position, center) {
    if (!shown.length) {
      selected = 0;
      drawTimeline();
      var why = rows.length ? "no step matches the filter" : "the run has no steps";
      pane.replaceChildren(el("p", "empty", why));
      return;
    }
    selected = Math.max(0, Math.min(shown.length - 1, position));
    // The spacer's height first: a scrollTop past the old height would be cut back to it.
    spacer.style.height = shown.length * ROW + "px";
    if (center) timeline.scrollTop = Math.max(0, selected * ROW - timeline.clientHeight / 3);
    else reveal(selected);
    drawTimeline();
    drawPane(shown[selected]);
  }

  // ---- the pane ------------------------------------------------------------------------

  // A body as drawn: JSON laid out as JSON.stringify(value, null, 2) lays it out, but with
  // its numbers and its keys' order as written (printing the parsed value would show
  // 12345678901234567890 as 12345678901234567000 and 148.0 as 148), strings as
  // JSON.stringify prints them ("\u00e9" as "é"); any other text as it is. ``nested``: a
  // string value that is itself a JSON document (an MCP tool's text content, a LangChain
  // tool's content) is laid out in its place the same way, and ``spans`` says where
  // ([from, to] in ``text``). Laid out up to ``limit`` characters (or so) when given: the
  // rest is drawn only on demand.
  function pretty(text, limit, nested) {
    var plain = { text: text, spans: [] };
    var head = text.trimStart().charAt(0);
    if (head !== "{" && head !== "[") return plain;
    try { JSON.parse(text); } catch (e) { return plain; } // not JSON
    return indent(text, limit || Infinity, Boolean(nested));
  }

  var TOKEN = /"(?:[^"\\]|\\.)*"|[{}[\],:]|[^\s{}[\],:"]+/; // each use makes its own, with g
  var CLOSE = { "{": "}", "[": "]" };
  // A string token whose text may begin a JSON object or array (after blanks, "\n" and such).
  var MAY_HOLD_JSON = /^"(?:\s|\\[nrt])*[{[]/;

  // The JSON text a string token holds, when it holds a document; null otherwise.
  function held(token) {
    if (!MAY_HOLD_JSON.test(token)) return null;
    var text = JSON.parse(token);
    try { JSON.parse(text); } catch (e) { return null; }
    return text;
  }

  function indent(json, limit, nested) {
    var out = "";
    var spans = [];
    var pads = [""];
    var open = null; // an object or array just begun: "{}" when it ends at once
    var within = []; // the objects and arrays open around the token, innermost last
    var prev = null; // the token before: an object's string after "{" or "," is a key
    function line(depth) {
      if (pads[depth] === undefined) pads[depth] = pads[depth - 1] + "  ";
      return "\n" + pads[depth];
    }
    var tokens = new RegExp(TOKEN.source, "g"); // a string's JSON is laid out inside this one
    var depth = 0;
    var found;
    while (out.length <= limit && (found = tokens.exec(json)) !== null) {
      var t = found[0];
      var key = within[within.length - 1] === "{" && (prev === "{" || prev === ",");
      prev = t;
      if (open !== null) {
        if (t === CLOSE[open]) { out += open + t; open = null; within.pop(); continue; }
        depth++;
        out += open + line(depth);
        open = null;
      }
      var inner = nested && !key && t.charAt(0) === '"' ? held(t) : null;
      if (t === "{" || t === "[") { open = t; within.push(t); }
      else if (t === "}" || t === "]") {
        depth--;
        within.pop();
        out += line(depth) + t;
      } else if (t === ",") out += "," + line(depth);
      else if (t === ":") out += ": ";
      else if (inner !== null) {
        var from = out.length;
        out += indent(inner, Infinity, true).text.split("\n").join(line(depth));
        spans.push([from, out.length]);
      } else if (t.charAt(0) === '"' && (t.indexOf("\\u") >= 0 || t.indexOf("\\/") >= 0)) {
        out += JSON.stringify(JSON.parse(t)); // escapes JSON.stringify writes otherwise
      } else out += t;
    }
    return { text: out, spans: spans };
  }

  // ``laid`` (see pretty) as the text of ``node``, up to ``limit`` characters, each string
  // laid out as JSON marked.
  function fill(node, laid, limit) {
    var text = laid.text;
    var end = Math.min(text.length, limit);
    var at = 0;
    node.replaceChildren();
    laid.spans.forEach(function (span) {
      if (span[0] >= end) return;
      node.appendChild(document.createTextNode(text.slice(at, span[0])));
      var json = el("span", "json-string", text.slice(span[0], Math.min(span[1], end)));
      json.title = "a string holding JSON, laid out";
      node.appendChild(json);
      at = Math.min(span[1], end);
    });
    node.appendChild(document.createTextNode(text.slice(at, end)));
  }

  // A body laid out (see pretty), with a button to show its strings that hold JSON as
  // recorded (one string each) and back, and one to draw the rest of a long body.
  function body(text, className) {
    var node = el("pre", "body " + (className || ""));
    var nested = true;
    var limit = BODY_LIMIT;
    var laid = pretty(text, limit, nested);
    if (!laid.spans.length && laid.text.length <= limit) {
      node.textContent = laid.text;
      return node;
    }
    var strings = laid.spans.length ? el("button", "strings", "show strings as recorded") : null;
    var more = el("button", "more", "show all " + text.length + " characters");
    function draw() {
      laid = pretty(text, limit, nested);
      fill(node, laid, limit);
      more.hidden = laid.text.length <= limit;
    }
    if (strings) {
      strings.title = "strings that hold JSON: as recorded, or laid out";
      strings.addEventListener("click", function () {
        nested = !nested;
        strings.textContent = nested ? "show strings as recorded" : "lay out strings holding JSON";
        draw();
      });
    }
    more.addEventListener("click", function () { limit = Infinity; draw(); });
    draw();
    return add(el("div"), strings, node, more);
  }

  function value(v) {
    return typeof v === "string" ? v : JSON.stringify(v, null, 2);
  }

  function part(p) {
    if (!p || typeof p !== "object") return body(value(p));
    var type = p.type;
    if ((type === "text" || type === "refusal" || type === "reasoning") && typeof p.content === "string") {
      return el("div", "text " + type, p.content);
    }
    if (type === "tool_call") {
      var call = el("div", "tool-call");
      add(call, el("span", "call-name", "→ " + (p.name || "?") + (p.id ? "  (" + p.id + ")" : "")));
      return add(call, body(value(p.arguments), "arguments"));
    }
    if (type === "tool_call_response") {
      var result = el("div", "tool-result");
      add(result, el("span", "call-name", "← result" + (p.id ? " of " + p.id : "")));
      var response = p.response !== undefined ? p.response : p.result;
      return add(result, body(value(response)));
    }
    if (type === "blob" || type === "uri" || type === "file") {
      return el("div", "media", "[" + (p.modality || type) + (p.mime_type ? " " + p.mime_type : "") + "]");
    }
    return body(value(p));
  }

  function message(m, differs) {
    var node = el("div", "message role-" + (m && m.role ? m.role : "unknown"));
    if (differs) node.classList.add("differs");
    add(node, el("div", "role", (m && m.role) || "?"));
    var parts = m && Array.isArray(m.parts) ? m.parts : null;
    if (parts === null) return add(node, body(value(m)));
    parts.forEach(function (p) { add(node, part(p)); });
    if (m.finish_reason) add(node, el("div", "finish", "finish: " + m.finish_reason));
    return node;
  }

  // A collapsible section of ``parent`` (open or not), returned to be filled.
  function section(parent, title, open, differs) {
    var details = el("details", "section");
    if (open) details.open = true;
    if (differs) details.classList.add("differs");
    add(parent, add(details, el("summary", null, title)));
    return details;
  }

  function ref(id) { return id === null || id === undefined ? null : contents[id]; }

  function fact(dl, term, text, differs) {
    if (text === null || text === undefined || text === "") return;
    var row = el("div", differs ? "fact differs" : "fact");
    add(dl, add(row, el("dt", null, term), el("dd", null, text)));
  }

  var FIDELITY = {
    exact: "exact: the recorded bytes",
    semantic: "semantic: a response rebuilt from the span's GenAI attributes (no recorded bytes)",
  };

  function stepView(step, other, label) {
    var view = el("div", "step kind-" + step.kind);
    var title = el("h2");
    add(title, el("span", "kind", step.kind), el("span", null, " " + step.name));
    add(view, label ? el("div", "side", label) : null, title);
    function d(key) { return other !== null && other[key] !== step[key]; }
    var facts = el("dl", "facts");
    fact(facts, "step", step.index + (step.depth ? "  (made inside step " + step.within + ")" : ""));
    fact(facts, "endpoint", step.endpoint, d("endpoint"));
    fact(facts, "model", step.model, d("model"));
    // Hosts move between environments: never a difference. A tool's or a value's "URL" is
    // its endpoint again ("tool:" and its name).
    fact(facts, "url", step.url === step.endpoint ? null : step.url);
    fact(facts, "started", step.offset_ms === null ? null : "+" + ms(step.offset_ms));
    fact(facts, "duration", ms(step.duration_ms));
    fact(facts, "tokens", tokens(step), d("tokens_in") || d("tokens_out"));
    fact(facts, "status", status(step), d("status") || d("error") || d("complete"));
    var unsent = step.request_size === null; // a source that did not carry the request's bytes
    fact(facts, "fidelity", (FIDELITY[step.fidelity] || step.fidelity) +
      (unsent && step.fidelity === "exact" ? " of the response; the request's are not known" : ""),
      d("fidelity"));
    fact(facts, "tool effect", step.effect);
    fact(facts, "fork", step.fork === "served" ? "served from the recording" : step.fork);
    fact(facts, "bytes", (unsent ? "request not known" : step.request_size + " request") + ", " +
      step.response_size + " response");
    add(view, facts);
    if (step.error) add(view, el("div", "error", "error: " + step.error));
    if (!data.content) {
      return add(view, el("p", "note", "metadata only: the report was written with --no-content"));
    }
    var llm = step.kind === "llm";
    if (llm) llmView(view, step, other);
    // A model call's bodies only when no message could be read from them (an error object).
    [["request", step.request_size], ["response", step.response_size]].forEach(function (side) {
      var key = side[0];
      if (step[key] !== null) {
        add(section(view, llm ? key + " body" : key, true, d(key)), body(ref(step[key])));
      } else if (!llm && side[1]) {
        add(view, el("p", "note", key + ": " + side[1] + " bytes, not text"));
      }
    });
    var headers = ref(step.headers);
    if (headers) {
      var h = section(view, "headers", false);
      [["request", headers[0]], ["response", headers[1]]].forEach(function (side) {
        if (!side[1].length) return;
        add(h, el("div", "side", side[0]), body(side[1].map(function (kv) {
          return kv[0] + ": " + kv[1];
        }).join("\n"), "headers"));
      });
    }
    return view;
  }

  function llmView(view, step, other) {
    function differs(key, i) {
      if (other === null) return false;
      if (i === undefined) return other[key] !== step[key];
      return (other[key] || [])[i] !== step[key][i];
    }
    var system = ref(step.system);
    if (system) {
      var s = section(view, "system instructions", false, differs("system"));
      system.forEach(function (p) { add(s, part(p)); });
    }
    var tools = ref(step.tools);
    if (tools) {
      var t = section(view, "tool definitions (" + tools.length + ")", false, differs("tools"));
      add(t, body(JSON.stringify(tools, null, 2)));
    }
    var prompt = section(view, "prompt: " + step.input.length + " message" +
      (step.input.length === 1 ? "" : "s"), true);
    step.input.forEach(function (id, i) {
      var m = contents[id];
      var shown = message(m, differs("input", i));
      if (m && SYSTEM[m.role]) {
        // Instructions sent as a message (OpenAI's system role): collapsed, as above.
        var folded = section(prompt, m.role + " instructions", false, differs("input", i));
        add(folded, shown);
      } else add(prompt, shown);
    });
    var said = step.output.map(function (id) { return contents[id]; });
    var finish = step.finish && step.finish.length ? step.finish : null;
    if (said.some(function (m) { return m && m.finish_reason; })) finish = null; // said there
    // No message but a body (an error object): the "response body" section below shows it.
    if (!said.length && step.response !== null && !finish) return;
    var answer = section(view, "response", true);
    said.forEach(function (m, i) { add(answer, message(m, differs("output", i))); });
    if (!said.length && step.response === null) add(answer, el("p", "note", "no response message"));
    if (finish) add(answer, el("div", "finish", "finish: " + finish.join(", ")));
  }

  // A changed value, with the part that differs marked and a window of context around it.
  function changedValue(text, other, side) {
    var node = el("div", "value " + side);
    add(node, el("span", "side", side === "before" ? "A " : "B "));
    if (text === null) return add(node, el("span", "absent", "(absent)"));
    if (other === null) return add(node, el("span", "whole", clip(text)));
    var start = 0;
    while (start < text.length && start < other.length && text[start] === other[start]) start++;
    var end = 0;
    while (end < text.length - start && end < other.length - start &&
      text[text.length - 1 - end] === other[other.length - 1 - end]) end++;
    // Whole words: "in transit" and "lost" differ as words, not from "in transi" to "los".
    while (start > 0 && WORD.test(text[start - 1])) start--;
    while (end > 0 && WORD.test(text[text.length - end])) end--;
    var from = Math.max(0, start - WINDOW);
    var to = Math.min(text.length, text.length - end + WINDOW);
    add(node,
      el("span", "context", (from ? "…" : "") + text.slice(from, start)),
      el("mark", null, clip(text.slice(start, text.length - end))), // a stream cut short: the rest
      el("span", "context", text.slice(text.length - end, to) + (to < text.length ? "…" : "")));
    return node;
  }

  function clip(text) {
    return text.length > 4 * WINDOW ? text.slice(0, 4 * WINDOW) + "…" : text;
  }

  function changesView(row) {
    var box = el("div", "changes");
    add(box, el("h3", null, row.changes.length + " difference" + (row.changes.length === 1 ? "" : "s")));
    row.changes.forEach(function (c) {
      var item = el("div", "change change-" + c.kind);
      add(item, el("div", "field", c.field + (c.kind === "changed" ? "" : " (" + c.kind + ")")));
      if (data.content) {
        var before = ref(c.before), after = ref(c.after);
        add(item, changedValue(before, after, "before"), changedValue(after, before, "after"));
      }
      add(box, item);
    });
    return box;
  }

  function drawPane(id) {
    var row = rows[id];
    var s = sides(row);
    var out = [];
    if (data.diff) {
      var head = el("div", "pair-head pair-" + row.status, statusWord(row));
      if (id === data.first) head.textContent += " · first divergence";
      out.push(head);
      if (row.changes.length) out.push(changesView(row));
      var columns = el("div", s.a && s.b ? "columns two" : "columns");
      if (s.a) add(columns, stepView(s.a, s.b, "A: step " + s.a.index + " of " + data.runs[0].id));
      if (s.b) add(columns, stepView(s.b, s.a, "B: step " + s.b.index + " of " + data.runs[1].id));
      out.push(columns);
    } else {
      out.push(stepView(s.main, null, null));
    }
    pane.replaceChildren.apply(pane, out);
    pane.scrollTop = 0;
  }

  // ---- filter and keys -------------------------------------------------------------------

  function applyFilter() {
    var current = shown[selected];
    var words = filterBox.value.toLowerCase().split(/\s+/).filter(Boolean);
    shown = [];
    for (var i = 0; i < rows.length; i++) {
      var text = words.length ? rowText(i) : "";
      if (words.every(function (w) { return text.indexOf(w) >= 0; })) shown.push(i);
    }
    var keep = shown.indexOf(current);
    select(keep >= 0 ? keep : 0, true);
  }

  filterBox.addEventListener("input", applyFilter);

  function nextDivergence(step) {
    for (var p = selected + step; p >= 0 && p < shown.length; p += step) {
      var pair = rows[shown[p]].status;
      if (pair !== "same" && pair !== "inside") return select(p, true);
    }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var inFilter = event.target === filterBox;
    var key = event.key;
    if (inFilter) {
      if (key === "Escape" || key === "Enter") {
        filterBox.blur();
        timeline.focus();
        event.preventDefault();
      } else if (key === "ArrowDown" || key === "ArrowUp") {
        select(selected + (key === "ArrowDown" ? 1 : -1), false);
        event.preventDefault();
      }
      return;
    }
    if (key === "j" || key === "ArrowDown") select(selected + 1, false);
    else if (key === "k" || key === "ArrowUp") select(selected - 1, false);
    else if (key === "Home") select(0, false);
    else if (key === "End") select(shown.length - 1, false);
    else if (key === "PageDown") select(selected + Math.floor(timeline.clientHeight / ROW), false);
    else if (key === "PageUp") select(selected - Math.floor(timeline.clientHeight / ROW), false);
    else if (key === "n" && data.diff) nextDivergence(1);
    else if (key === "N" && data.diff) nextDivergence(-1);
    else if (key === "/") filterBox.focus();
    else return;
    event.preventDefault();
  });

  document.body.classList.add(data.diff ? "mode-diff" : "mode-single");
  select(data.first === null ? 0 : data.first, true);
  timeline.focus();
})();
