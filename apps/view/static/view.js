// rewardlab view: the pages' behaviour. Tables are Tabulator (remote paging, sorting and filtering: the
// server holds the rows), curves are uPlot. Every filter lives in the page's query string, so a view is a
// link. Text from rows is untrusted (completions written by a policy): it is only ever set as textContent.
"use strict";
const rk = (() => {
  const params = () => new URLSearchParams(location.search);

  async function getJSON(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    return response.json();
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else node.setAttribute(k, v);
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }

  function fillForm(form, query) {
    for (const input of form.elements) {
      if (!input.name || !query.has(input.name)) continue;
      if (input.type === "checkbox") input.checked = true;
      else input.value = query.get(input.name);
    }
  }

  function showError(where, error) {
    document.querySelector(where).replaceChildren(el("p", {class: "bad", text: String(error)}));
  }

  // ---- tables of rows (scored files, eval samples) ---------------------------------------------------
  async function fillFacets(sid, form, table) {
    const facets = await getJSON(`/api/s/${sid}/facets`);
    for (const name of OPTIONAL) if ((facets.columns || {})[name] > 0) table.showColumn(name);
    for (const [name, counts] of Object.entries(facets)) {
      const select = form.elements[name];
      if (!select || name === "columns") continue;
      for (const [value, n] of Object.entries(counts)) {
        if (value) select.add(new Option(`${value} (${n})`, value));
      }
    }
    fillForm(form, params()); // the options exist now
  }

  function rewardCell(cell) {
    const v = cell.getValue();
    const span = el("span", {text: v === null || v === undefined ? "—" : String(+v.toFixed(4))});
    span.className = v === null || v === undefined ? "muted" : v > 0 ? "ok" : "bad";
    return span;
  }

  // a reward time in seconds, blank where the row has none (rows written before they carried one)
  function secondsCell(cell) {
    const v = cell.getValue();
    return v === null || v === undefined ? "" : (+v).toFixed(4);
  }

  // a rubric's score, blank where the row has none (rows of other reward sources)
  function scoreCell(cell) {
    const v = cell.getValue();
    return v === null || v === undefined ? "" : String(+(+v).toFixed(4));
  }

  // optional columns: hidden until some row has a value (the facets count them; a page's rows show it at once)
  const OPTIONAL = ["rubric_score"];

  function rubricColumn() {
    return {title: "rubric", field: "rubric_score", formatter: scoreCell, width: 80, hozAlign: "right", visible: params().get("sort") === "rubric_score"};
  }

  function linkCell(sid) {
    return (cell) => el("a", {href: `/s/${sid}/row/${cell.getRow().getData().row}`, class: "rowlink", text: String(cell.getValue())});
  }

  const COLUMNS = {
    scored: (sid) => [
      {title: "#", field: "row", width: 70, headerSort: true},
      {title: "id", field: "id", formatter: linkCell(sid), width: 180},
      {title: "reward", field: "reward", formatter: rewardCell, width: 90, hozAlign: "right"},
      {title: "error", field: "error", width: 170},
      {title: "verifier", field: "verifier", width: 100},
      {title: "prompt chars", field: "prompt_chars", width: 110, hozAlign: "right"},
      {title: "completion chars", field: "completion_chars", width: 130, hozAlign: "right"},
      {title: "reward s", field: "reward_time_s", formatter: secondsCell, width: 90, hozAlign: "right"},
      rubricColumn(),
      {title: "completion", field: "preview", headerSort: false},
    ],
    eval: (sid) => [
      {title: "#", field: "row", width: 70},
      {title: "problem", field: "id", formatter: linkCell(sid), width: 150},
      {title: "sample", field: "sample", width: 80, hozAlign: "right"},
      {title: "reward", field: "reward", formatter: rewardCell, width: 90, hozAlign: "right"},
      {title: "answer", field: "answer", width: 110},
      {title: "error", field: "error", width: 150},
      {title: "finish", field: "finish_reason", width: 80},
      {title: "completion chars", field: "completion_chars", width: 130, hozAlign: "right"},
      rubricColumn(),
      {title: "completion", field: "preview", headerSort: false},
    ],
  };

  function rowsTable({sid, el: where, kind}) {
    const form = document.querySelector("#filters");
    const start = params();
    fillForm(form, start);
    const table = new Tabulator(where, {
      layout: "fitColumns",
      pagination: true,
      paginationMode: "remote",
      paginationSize: +(start.get("size") || 50),
      paginationInitialPage: +(start.get("page") || 1),
      paginationSizeSelector: [25, 50, 100, 200],
      paginationCounter: "rows",
      sortMode: "remote",
      ajaxURL: `/api/s/${sid}/rows`,
      ajaxURLGenerator: (url, config, p) => {
        const query = params();
        query.set("page", p.page);
        query.set("size", p.size);
        query.delete("sort");
        query.delete("dir");
        if (p.sort && p.sort.length) {
          query.set("sort", p.sort[0].field);
          query.set("dir", p.sort[0].dir);
        }
        // the form's hidden fields follow, so submitting a filter keeps a sort chosen by a header click
        form.elements.sort.value = query.get("sort") || "";
        form.elements.dir.value = query.get("dir") || "";
        history.replaceState(null, "", `?${query}`);
        return `${url}?${query}`;
      },
      ajaxResponse: (url, p, response) => {
        document.querySelector("#count").textContent = `${response.last_row} of ${response.total} rows`;
        for (const name of OPTIONAL) {
          if (response.data.some((r) => r[name] !== null && r[name] !== undefined)) table.showColumn(name);
        }
        return response;
      },
      initialSort: start.get("sort") ? [{column: start.get("sort"), dir: start.get("dir") || "asc"}] : [],
      columns: COLUMNS[kind](sid),
      placeholder: "no rows match these filters",
    });
    table.on("rowClick", (e, row) => {
      if (e.target.tagName !== "A") location.href = `/s/${sid}/row/${row.getData().row}`;
    });
    table.on("tableBuilt", () => fillFacets(sid, form, table).catch((e) => showError("#count", e)));
    return table;
  }

  // ---- rubric criteria: mean share met per category (every page whose rows carry details.criteria) ----
  // steps: an RL run's two compared steps, each a column beside all logged samples
  async function criteriaPanel({sid, steps = []}) {
    const box = document.querySelector("#criteria");
    if (!box) return;
    try {
      const {summary, steps: bySteps} = await getJSON(`/api/s/${sid}/criteria`);
      if (!summary || !summary.samples) return;
      const shown = steps.filter((s) => s !== undefined && s !== null && s !== "");
      const columns = [["all", summary], ...shown.map((s) => [`step ${s}`, (bySteps || {})[String(s)] || {}])];
      const pct = (v) => (v === null || v === undefined ? "—" : `${(100 * v).toFixed(1)}%`);
      const head = el("tr", {}, el("th", {text: "category"}), ...columns.map(([name]) => el("th", {text: `${name}: mean share met`})),
        el("th", {text: "samples"}), el("th", {text: "criteria"}), el("th", {text: "without a verdict"}));
      const body = el("tbody");
      for (const [category, entry] of Object.entries(summary.categories)) {
        const cells = columns.map(([, s]) => el("td", {class: "share", text: pct(((s.categories || {})[category] || {}).mean_share_met)}));
        body.append(el("tr", {"data-category": category}, el("td", {text: category}), ...cells,
          el("td", {text: String(entry.samples)}), el("td", {text: String(entry.criteria)}), el("td", {text: String(entry.no_verdict)})));
      }
      const score = summary.mean_rubric_score === null ? "" : ` · mean rubric score ${(+summary.mean_rubric_score).toFixed(4)}`;
      const errors = summary.errors ? ` · ${summary.errors} rows with an error left out` : "";
      box.replaceChildren(
        el("h2", {text: "Rubric criteria "}, el("span", {class: "muted", text: `(${summary.samples} samples with criteria${score}${errors}; share met among criteria with a verdict, per sample, then the mean)`})),
        el("table", {class: "plain criteria-summary", id: "criteria-summary"}, el("thead", {}, head), body),
      );
      box.hidden = false;
    } catch (e) {
      box.hidden = false;
      showError("#criteria", e);
    }
  }

  // ---- eval runs ----------------------------------------------------------------------------------------
  async function evalPage({sid}) {
    const start = params();
    if (start.get("problem")) document.querySelector("#problem-label").textContent = `of problem ${start.get("problem")}`;
    rowsTable({sid, el: "#rows", kind: "eval"});
    criteriaPanel({sid});
    try {
      const {data} = await getJSON(`/api/s/${sid}/problems`);
      const metricCols = Object.keys(data[0] || {}).filter((k) => k.includes("@"));
      const problems = new Tabulator("#problems", {
        data,
        layout: "fitColumns",
        pagination: true,
        paginationSize: 10,
        paginationCounter: "rows",
        columns: [
          {title: "problem", field: "id"},
          {title: "samples", field: "samples", hozAlign: "right"},
          {title: "correct", field: "correct", hozAlign: "right"},
          ...metricCols.map((k) => ({title: k, field: k, hozAlign: "right",
            formatter: (c) => (c.getValue() === null ? "—" : c.getValue().toFixed(3))})),
        ],
      });
      problems.on("rowClick", (e, row) => {
        const query = params();
        query.set("problem", row.getData().id);
        query.delete("page");
        location.search = query.toString();
      });
    } catch (e) {
      showError("#problems", e);
    }
  }

  // ---- RL runs ------------------------------------------------------------------------------------------
  // what tells first whether a run learns or games its reward: reward, held-out accuracy, length, truncation
  const DEFAULT_KEYS = [/^reward$/, /^rewards\/.*\/mean$/, /^eval\/pass@1$/, /^completions\/mean_length$/,
    /^completions\/clipped_ratio$/, /^frac_reward_zero_std$/, /^entropy$/, /^kl$/];

  function defaultKeys(keys, panelKeys) {
    const chosen = [];
    for (const pattern of DEFAULT_KEYS) {
      for (const k of keys) if (pattern.test(k) && !chosen.includes(k) && chosen.length < 6) chosen.push(k);
    }
    // the entropy and curriculum panels plot their keys already: the fallback's first four (sorted) would
    // otherwise be them
    return chosen.length ? chosen : keys.filter((k) => !panelKeys.has(k)).slice(0, 4);
  }

  function line(label, stroke, width = 1.5, extra = {}) {
    return {label, stroke, width, spanGaps: true, points: {show: false}, ...extra};
  }

  // more.scales and more.axes: a second y scale with its axis (a series on it names it as its scale)
  function plot(box, title, lines, data, y = {}, more = {}) {
    const cell = el("div", {class: "curve"});
    box.append(cell);
    const opts = {
      title, width: 420, height: 200,
      scales: {x: {time: false}, y, ...(more.scales || {})},
      series: [{label: "step"}, ...lines],
      axes: [{label: "step"}, more.y || {}, ...(more.axes || [])],
    };
    new uPlot(opts, data, cell);
  }

  function drawCurves(metrics, keys) {
    const box = document.querySelector("#curves");
    box.replaceChildren();
    for (const key of keys) plot(box, key, [line(key, "#2563eb")], [metrics.steps, metrics.series[key]]);
  }

  // The entropy panel: whether the policy collapses. A falling mean alone cannot tell every token narrowing
  // a little from a growing share of tokens going deterministic while the rest stay wide; the percentiles
  // and the share below 0.05 nats can. data.entropy_panel names the keys; runs logged before them have none.
  function entropyKeys(panel) {
    if (!panel) return new Set();
    return new Set([...panel.percentiles.map((q) => q.key), panel.near_deterministic].filter(Boolean));
  }

  // one colour family reads as one distribution; the median darkest and thickest, the tails lightest
  function percentileLine({key, p}) {
    const off = Math.abs(p - 50);
    const [stroke, width] = off === 0 ? ["#5b21b6", 2.5] : off <= 25 ? ["#8b5cf6", 1.5] : ["#c4b5fd", 1.25];
    return line(key.replace(/^entropy\//, ""), stroke, width);
  }

  function drawEntropy(metrics) {
    const panel = metrics.entropy;
    const box = document.querySelector("#entropy");
    box.hidden = !panel;
    if (!panel) return;
    const curves = el("div", {class: "curves"});
    box.replaceChildren(
      el("h2", {text: "Entropy "}, el("span", {class: "muted", text: "(per-token policy entropy of each step, nats)"})),
      curves,
    );
    const column = (key) => metrics.series[key];
    if (panel.percentiles.length) { // without them the mean is one of the curves above already
      const lines = panel.percentiles.map(percentileLine);
      const data = panel.percentiles.map((q) => column(q.key));
      if (panel.mean) { // not a percentile: another colour, dashed
        lines.push(line("mean", "#d97706", 1.5, {dash: [6, 4]}));
        data.push(column(panel.mean));
      }
      plot(curves, "entropy percentiles", lines, [metrics.steps, ...data]);
    }
    if (panel.near_deterministic) {
      // a share: the whole 0..1 range, so a rise from 0.01 to 0.03 does not fill the chart
      plot(curves, "share of tokens below 0.05 nats", [line("near-deterministic", "#b91c1c")],
        [metrics.steps, column(panel.near_deterministic)], {range: [0, 1]});
    }
  }

  // The curriculum panel (issue 50): which prompts the curriculum draws next and why, per step. Per-source
  // probabilities, shares drawn and bandit scores, one line a source in one colour on every chart; the
  // scalars: shares in 0..1 on the left axis, difficulty (the data's own scale) on the right. data.curriculum_panel
  // names the keys; a run without a curriculum has none.
  const SOURCE_COLOURS = ["#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
    "#78350f", "#475569"];
  const CURRICULUM_GROUPS = ["difficulty", "shares", "hints", "p", "score", "drawn"];

  function curriculumKeys(panel) {
    if (!panel) return new Set();
    return new Set(CURRICULUM_GROUPS.flatMap((group) => panel[group].map((s) => s.key)));
  }

  function drawCurriculum(metrics) {
    const panel = metrics.curriculum;
    const box = document.querySelector("#curriculum");
    box.hidden = !panel;
    if (!panel) return;
    const curves = document.querySelector("#curriculum-curves");
    curves.replaceChildren();
    const column = (key) => metrics.series[key];
    const sources = [...new Set(["p", "drawn", "score"].flatMap((f) => panel[f].map((s) => s.source)))].sort();
    const colour = (source) => SOURCE_COLOURS[sources.indexOf(source) % SOURCE_COLOURS.length];
    const perSource = (family, title, y = {}) => {
      if (!panel[family].length) return;
      const lines = panel[family].map((s) => line(s.source, colour(s.source)));
      plot(curves, title, lines, [metrics.steps, ...panel[family].map((s) => column(s.key))], y);
    };
    perSource("p", "sampling probability per source", {range: [0, 1]});
    perSource("drawn", "share drawn per source", {range: [0, 1]});
    perSource("score", "score per source (bandit: UCB or Q)");

    // the scalars: shares on the usual axis (0..1); with shares, difficulty on a scale and axis of its own, on
    // the right (target solid, drawn dashed); alone, on the usual one
    const SHARE_COLOURS = {"prefix fraction": "#2563eb", "hint fraction": "#d97706", "hint solved": "#b45309",
      "high-p share": "#7c3aed"};
    const ownAxis = panel.shares.length > 0 && panel.difficulty.length > 0;
    const scalars = [
      ...panel.shares.map((s) => [s, line(s.label, SHARE_COLOURS[s.label] || "#475569")]),
      ...panel.difficulty.map((s, i) => [s, line(s.label, i ? "#14b8a6" : "#0f766e", 2,
        {...(ownAxis ? {scale: "difficulty"} : {}), ...(i ? {dash: [6, 4]} : {})})]),
    ];
    if (scalars.length) {
      const lines = scalars.map(([, l]) => l);
      const data = [metrics.steps, ...scalars.map(([s]) => column(s.key))];
      if (ownAxis) {
        plot(curves, "shares (left, 0..1) and difficulty (right)", lines, data, {range: [0, 1]}, {
          scales: {difficulty: {auto: true}},
          y: {label: "share"},
          axes: [{scale: "difficulty", side: 1, label: "difficulty", grid: {show: false}}],
        });
      } else if (panel.shares.length) {
        plot(curves, "curriculum shares", lines, data, {range: [0, 1]});
      } else {
        plot(curves, "difficulty", lines, data);
      }
    }
    if (panel.hints.length) {
      const strokes = ["#b45309", "#fbbf24"];
      plot(curves, "hinted groups and samples per step", panel.hints.map((s, i) => line(s.label, strokes[i % 2])),
        [metrics.steps, ...panel.hints.map((s) => column(s.key))]);
    }
    if (!curves.children.length) {
      curves.append(el("p", {class: "muted", text: "none of its series is one this panel plots (see the curves above)"}));
    }
  }

  function sampleCard(s) {
    const card = el("div", {class: "sample" + (s.flags && s.flags.length ? " flagged" : "")});
    if (s.malformed) {
      card.append(el("p", {class: "bad", text: "malformed line"}), el("pre", {text: s.raw}));
      return card;
    }
    const num = (v) => (v === null || v === undefined ? "—" : String(+(+v).toFixed(4)));
    const shaped = s.shaped_reward !== undefined && s.shaped_reward !== s.reward ? ` (shaped ${num(s.shaped_reward)})` : "";
    const time = s.reward_time_s === null || s.reward_time_s === undefined ? "" : ` · scored in ${(+s.reward_time_s).toFixed(4)} s`;
    const head = `group ${s.group} · sample ${s.index} · reward ${num(s.reward)}${shaped} · advantage ${num(s.advantage)} · ${s.length} tokens` + (s.truncated ? " · truncated" : "") + time;
    card.append(el("div", {class: "head", text: head}));
    const sources = Object.entries(s.rewards || {}).map(([k, v]) => `${k}: ${num(v)}`).join("  ");
    if (sources) card.append(el("div", {class: "muted", text: sources}));
    if (s.flags && s.flags.length) {
      const list = el("ul", {class: "flags"});
      for (const f of s.flags) list.append(el("li", {text: `⚑ ${f}`}));
      card.append(list);
    }
    const reference = typeof s.reference === "string" ? s.reference : JSON.stringify(s.reference);
    const short = (s.prompt || "").length <= 100 && !(s.prompt || "").includes("\n");
    const prompt = short
      ? el("div", {class: "muted", text: `prompt ${s.prompt || ""} · reference ${reference}`})
      : el("details", {}, el("summary", {text: `prompt · reference ${reference}`}), el("pre", {text: s.prompt || ""}));
    const completion = el("pre", {class: "completion"});
    for (const part of s.parts) completion.append(part.answer ? el("mark", {class: "answer", text: part.text}) : part.text);
    card.append(prompt, completion);
    return card;
  }

  async function showStep(where, sid, step, flaggedOnly, slowestFirst) {
    const box = document.querySelector(where);
    if (step === null || step === undefined || step === "") {
      box.replaceChildren(el("p", {class: "muted", text: "no samples logged (run.log_completions)"}));
      return;
    }
    const sort = slowestFirst ? "&sort=reward_time_s" : "";
    const {samples} = await getJSON(`/api/s/${sid}/samples?step=${encodeURIComponent(step)}${sort}`);
    const shown = flaggedOnly ? samples.filter((s) => s.flags && s.flags.length) : samples;
    const flagged = samples.filter((s) => s.flags && s.flags.length).length;
    box.replaceChildren(el("h3", {text: `step ${step}: ${samples.length} samples, ${flagged} flagged`}), ...shown.map(sampleCard));
  }

  async function rlPage({sid}) {
    const start = params();
    try {
      const metrics = await getJSON(`/api/s/${sid}/metrics`);
      const keys = Object.keys(metrics.series);
      const chosen = start.get("keys") ? start.get("keys").split(",").filter((k) => keys.includes(k)) : defaultKeys(keys, new Set([...entropyKeys(metrics.entropy), ...curriculumKeys(metrics.curriculum)]));
      const list = document.querySelector("#keys");
      for (const key of keys) {
        const box = el("input", {type: "checkbox", value: key});
        box.checked = chosen.includes(key);
        box.addEventListener("change", () => {
          const picked = [...list.querySelectorAll("input:checked")].map((b) => b.value);
          const query = params();
          query.set("keys", picked.join(","));
          history.replaceState(null, "", `?${query}`);
          document.querySelector("#keys-field").value = picked.join(",");
          drawCurves(metrics, picked);
        });
        list.append(el("label", {}, box, ` ${key}`));
      }
      document.querySelector("#keys-field").value = chosen.join(",");
      if (metrics.malformed) list.append(el("p", {class: "bad", text: `${metrics.malformed} malformed line(s) in metrics.jsonl skipped`}));
      drawCurves(metrics, chosen);
      drawEntropy(metrics);
      drawCurriculum(metrics);
    } catch (e) {
      showError("#curves", e);
    }
    try {
      const {steps} = await getJSON(`/api/s/${sid}/steps`);
      const a = start.get("a") || steps[0];
      const b = start.get("b") || steps[steps.length - 1];
      for (const [id, value] of [["#step-a", a], ["#step-b", b]]) {
        const select = document.querySelector(id);
        for (const s of steps) select.add(new Option(`step ${s}`, s));
        if (value !== undefined) select.value = value;
      }
      criteriaPanel({sid, steps: [a, b]});
      const flaggedOnly = start.get("flagged") === "1";
      document.querySelector("#flagged").checked = flaggedOnly;
      const slowestFirst = start.get("sort") === "reward_time_s";
      document.querySelector("#slowest").checked = slowestFirst;
      await Promise.all([showStep("#side-a", sid, a, flaggedOnly, slowestFirst), showStep("#side-b", sid, b, flaggedOnly, slowestFirst)]);
    } catch (e) {
      showError("#side-a", e);
    }
  }

  return {rowsTable, criteriaPanel, evalPage, rlPage};
})();
