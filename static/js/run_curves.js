/* Live training curves of a run page, drawn with uPlot (static/vendor/uplot).
 *
 * The page holds <div id="run-curves" data-metrics-url data-run-url data-active>. While the run is active this
 * polls GET /api/v1/runs/<id>/metrics/?since_step=<last step - 1> (the last step is fetched again because the
 * supervisor may have stored only part of its keys), merges the points, and redraws; it stops once the run API
 * reports a final status. Controls: EMA smoothing, x axis (step or seconds since the run's first point), and an
 * overlay run drawn dashed. The reward chart leaves out the reward's step counters (reward/n_*): counts, not
 * terms. Held-out curves (val/*: validation.every_steps) share the chart of their training metric, dotted. data-points on the container counts the points received (the browser test reads it).
 */
(function () {
  "use strict";

  var PROCESS = [
    "reward/optimal_depth/mean", "search_efficiency",
    "reward/sufficiency/mean", "reward/thinking/mean",
    "reward/R_path/mean", "reward/S_self/mean", "reward/S_ref/mean",
  ];
  var GROUPS = [
    { id: "reward", title: "Reward: mean ± std, components", match: function (k) { return k === "reward/mean" || (/^reward\/.+\/mean$/.test(k) && !/^reward\/n_/.test(k) && PROCESS.indexOf(k) < 0); } },
    { id: "search", title: "Over-/under-search rate (OSR, USR)", keys: ["osr", "usr", "val/osr", "val/usr"], unit: true },
    { id: "depth", title: "Search depth (searches per trajectory)", keys: ["searches/mean", "val/average_searches"] },
    // Each method's own process signal, beside HiPRAG's OSR/USR: AutoSearch's optimal depth t_c and search
    // efficiency (EM / depth), TIRESRAG-R1's sufficiency and thinking scores, Search-P1's path scores.
    { id: "process", title: "Process metrics (AutoSearch depth t_c and efficiency, TIRESRAG sufficiency and thinking, Search-P1 path)", keys: PROCESS },
    { id: "judge", title: "Judge errors and unscorable completions per step (never counted as “no”)", keys: ["judge_errors", "reward/unscorable"] },
    // The LLM judge's cost per logged step (trainer.callbacks: judge/*), and in money where the admin set a price
    // for the run's judge model (GET <run API>/judge-price/; judge/cost is derived here from the tokens).
    { id: "judgecalls", title: "Judge calls per step (sent; failed after their last retry)", keys: ["judge/calls", "judge/errors"] },
    { id: "judgetokens", title: "Judge tokens per step (prompt in, completion out)", keys: ["judge/tokens_in", "judge/tokens_out"] },
    { id: "judgeseconds", title: "Judge seconds per step (summed call latency; calls overlap)", keys: ["judge/seconds"] },
    { id: "judgecost", title: "Judge cost per step", keys: ["judge/cost"] },
    { id: "format", title: "Format-correct rate", keys: ["format_ok_rate", "val/format_ok_rate"], unit: true },
    { id: "accuracy", title: "Accuracy (CEM), EM, F1", keys: ["accuracy", "em", "f1", "val/cem", "val/em", "val/acc"], unit: true },
    { id: "length", title: "Completion length (policy tokens)", keys: ["completion_length"] },
    { id: "kl", title: "KL and entropy", keys: ["kl", "entropy"] },
    { id: "clip", title: "Clip ratio", keys: ["clip_ratio"] },
    { id: "steptime", title: "Step time (s)", keys: ["step_time"] },
    { id: "loss", title: "Loss", keys: ["loss"] },
  ];
  // Held-out questions evaluated every N steps (validation.every_steps): drawn dotted with a marker per validation,
  // in the chart of the training metric they mirror (val/cem beside accuracy, val/osr beside osr, …).
  function heldOut(key) { return key.indexOf("val/") === 0; }  // a series' label starts with its key
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  var ACTIVE = ["pending", "running"];
  var POLL_MS = 2000;

  function newSeriesStore() {
    return { keys: {}, lastStep: null, t0: null, count: 0 };
  }

  function merge(store, points) {
    points.forEach(function (p) {
      var t = Date.parse(p.wall_time) / 1000;
      var byStep = store.keys[p.key] || (store.keys[p.key] = {});
      if (!(p.step in byStep)) store.count += 1;
      byStep[p.step] = { v: p.value, t: t };
      if (store.lastStep === null || p.step > store.lastStep) store.lastStep = p.step;
      if (store.t0 === null || t < store.t0) store.t0 = t;
    });
  }

  function fetchJson(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error(url + ": HTTP " + r.status);
      return r.json();
    });
  }

  // Fetch every point after the store's last step (again from the last step itself), in pages of `limit`.
  function fetchNew(baseUrl, store) {
    var limit = 10000;
    function page() {
      var since = store.lastStep === null ? "" : "&since_step=" + (store.lastStep - 1);
      return fetchJson(baseUrl + "?limit=" + limit + since).then(function (body) {
        var before = store.lastStep;
        merge(store, body.results);
        if (body.results.length === limit && store.lastStep !== before) return page();
        return body.results.length;
      });
    }
    return page();
  }

  // Tick labels that stay readable for a loss of 3e-8 as for a length of 512.
  function tickLabels(u, splits) {
    return splits.map(function (v) {
      if (v === null) return "";
      if (v !== 0 && Math.abs(v) < 1e-3) return v.toExponential(1);
      return String(Number(v.toPrecision(4)));
    });
  }

  function ema(values, weight) {
    var out = new Array(values.length), last = null;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null || v === undefined) { out[i] = null; continue; }
      last = last === null ? v : weight * last + (1 - weight) * v;
      out[i] = last;
    }
    return out;
  }

  function groupKeys(group, stores) {
    var found = {};
    stores.forEach(function (s) {
      Object.keys(s.keys).forEach(function (k) {
        if (group.match ? group.match(k) : group.keys.indexOf(k) >= 0) found[k] = true;
      });
    });
    var keys = Object.keys(found);
    keys.sort(function (a, b) { return (a === "reward/mean" ? -1 : 0) - (b === "reward/mean" ? -1 : 0) || a.localeCompare(b); });
    return keys;
  }

  var STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

  function xOf(store, step, point, mode) {
    return mode === "time" ? Math.round((point.t - store.t0) * 10) / 10 : Number(step);
  }

  // uPlot's columnar data for one chart: x = the union of every drawn series' x values.
  function buildData(group, runs, mode, smoothing) {
    var keys = groupKeys(group, runs.map(function (r) { return r.store; }));
    var xs = {};
    runs.forEach(function (r) {
      keys.forEach(function (k) {
        var byStep = r.store.keys[k] || {};
        Object.keys(byStep).forEach(function (step) { xs[xOf(r.store, step, byStep[step], mode)] = true; });
      });
    });
    var x = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
    var index = {};
    x.forEach(function (v, i) { index[v] = i; });
    var data = [x], series = [{ label: mode === "time" ? "seconds" : "step" }], bands = [];
    function column(store, key) {
      var col = new Array(x.length).fill(null), byStep = store.keys[key] || {};
      Object.keys(byStep).forEach(function (step) { col[index[xOf(store, step, byStep[step], mode)]] = byStep[step].v; });
      return ema(col, smoothing);
    }
    runs.forEach(function (r, runIndex) {
      keys.forEach(function (k, keyIndex) {
        if (!r.store.keys[k]) return;
        var color = COLORS[keyIndex % COLORS.length], mean = column(r.store, k);
        var label = (r.label ? k + " (" + r.label + ")" : k) + (heldOut(k) ? " · held-out" : "");
        data.push(mean);
        series.push(heldOut(k)
          ? { label: label, stroke: color, width: 2, dash: [2, 3], points: { show: true, size: 7, fill: color }, spanGaps: true }
          : { label: label, stroke: color, width: runIndex ? 1.5 : 2, dash: runIndex ? [6, 4] : undefined, spanGaps: true });
        var stdKey = k.replace(/\/mean$/, "/std");
        if (k === "reward/mean" && r.store.keys[stdKey]) {
          var std = column(r.store, stdKey);
          var hi = mean.map(function (m, i) { return m === null || std[i] === null ? null : m + std[i]; });
          var lo = mean.map(function (m, i) { return m === null || std[i] === null ? null : m - std[i]; });
          data.push(hi, lo);
          var faint = runIndex ? "rgba(120,120,120,0.35)" : "rgba(31,119,180,0.35)";
          series.push({ label: label + " +σ", stroke: faint, width: 1, spanGaps: true });
          series.push({ label: label + " −σ", stroke: faint, width: 1, spanGaps: true });
          bands.push({ series: [series.length - 2, series.length - 1], fill: runIndex ? "rgba(120,120,120,0.10)" : "rgba(31,119,180,0.15)" });
        }
      });
    });
    return { data: data, series: series, bands: bands, signature: series.map(function (s) { return s.label; }).join("|") };
  }

  function RunCurves(root) {
    this.root = root;
    this.primary = { store: newSeriesStore(), label: "", url: root.dataset.metricsUrl };
    this.overlay = null;
    this.charts = {};
    this.active = root.dataset.active === "true";
    this.mode = "step";
    this.smoothing = 0;
    this.price = undefined;  // the judge model's price: undefined until asked, null when none is set
    this.grid = root.querySelector(".curve-grid");
    this.note = root.querySelector(".curve-note");
    this.bindControls();
    this.tick();
    var self = this;
    window.addEventListener("resize", function () { self.resize(); });
  }

  RunCurves.prototype.bindControls = function () {
    var self = this, root = this.root;
    var smoothing = root.querySelector("[name=smoothing]");
    var xAxis = root.querySelector("[name=x_axis]");
    var overlay = root.querySelector("[name=overlay]");
    if (smoothing) smoothing.addEventListener("input", function () {
      self.smoothing = Number(smoothing.value);
      root.querySelector(".smoothing-value").textContent = self.smoothing.toFixed(2);
      self.draw();
    });
    if (xAxis) xAxis.addEventListener("change", function () { self.mode = xAxis.value; self.draw(true); });
    if (overlay) overlay.addEventListener("change", function () {
      var opt = overlay.selectedOptions[0];
      if (!overlay.value) { self.overlay = null; self.draw(true); return; }
      self.overlay = { store: newSeriesStore(), label: opt.textContent.trim(), url: opt.dataset.metricsUrl };
      fetchNew(self.overlay.url, self.overlay.store).then(function () { self.draw(true); }, function (e) { self.setNote(e.message); });
    });
  };

  RunCurves.prototype.setNote = function (text) { if (this.note) this.note.textContent = text; };

  // judge/cost per step = tokens_in · input price + tokens_out · output price (per 1,000,000 tokens), where a price
  // is set for the run's judge model; the price is asked for once, when the first judge tokens arrive.
  RunCurves.prototype.judgeMoney = function () {
    var self = this, keys = this.primary.store.keys;
    if (!keys["judge/tokens_in"] || this.price === null) return Promise.resolve();
    var ready = this.price ? Promise.resolve(this.price) : fetchJson(this.root.dataset.runUrl + "judge-price/").then(
      function (body) { self.price = body.price || null; return self.price; },
      function () { self.price = null; return null; });
    return ready.then(function (price) {
      if (!price) return;
      GROUPS.forEach(function (g) {
        if (g.id === "judgecost") g.title = "Judge cost per step (" + price.currency + ", at the judge model's price)";
      });
      var cost = keys["judge/cost"] = {}, out = keys["judge/tokens_out"] || {};
      Object.keys(keys["judge/tokens_in"]).forEach(function (step) {
        var tin = keys["judge/tokens_in"][step], tout = out[step] ? out[step].v : 0;
        cost[step] = { v: (tin.v * price.input_per_million + tout * price.output_per_million) / 1e6, t: tin.t };
      });
    });
  };

  RunCurves.prototype.tick = function () {
    var self = this;
    fetchNew(this.primary.url, this.primary.store)
      .then(function () { return self.judgeMoney(); })
      .then(function () {
        self.draw();
        if (!self.active) return null;
        return fetchJson(self.root.dataset.runUrl).then(function (run) {
          self.root.dataset.status = run.status;
          if (ACTIVE.indexOf(run.status) < 0) {
            self.active = false;
            return fetchNew(self.primary.url, self.primary.store).then(function () { self.draw(); });
          }
          return null;
        });
      })
      .catch(function (e) { self.setNote("Could not load metrics: " + e.message); })
      .then(function () {
        self.root.dataset.active = String(self.active);
        if (self.active) setTimeout(function () { self.tick(); }, POLL_MS);
        else self.setNote(self.primary.store.count ? "" : "No metrics were logged.");
      });
  };

  RunCurves.prototype.width = function () {
    // Two charts a row on a wide page; 12 px of each box go to its border and padding, 16 px to the gap.
    var columns = this.grid.clientWidth > 900 ? 2 : 1;
    return Math.max(280, Math.floor((this.grid.clientWidth - 16 * (columns - 1)) / columns) - 12);
  };

  RunCurves.prototype.resize = function () {
    var w = this.width();
    Object.keys(this.charts).forEach(function (id) { this.charts[id].plot.setSize({ width: w, height: 220 }); }, this);
  };

  RunCurves.prototype.draw = function (rebuild) {
    var runs = [this.primary].concat(this.overlay ? [this.overlay] : []);
    this.root.dataset.points = String(this.primary.store.count);
    this.root.dataset.lastStep = this.primary.store.lastStep === null ? "" : String(this.primary.store.lastStep);
    if (this.primary.store.count) this.setNote("");
    else if (this.active) this.setNote("Waiting for the first logged step…");
    GROUPS.forEach(function (group) {
      var built = buildData(group, runs, this.mode, this.smoothing);
      var chart = this.charts[group.id];
      if (built.series.length < 2) return;
      if (chart && (rebuild || chart.signature !== built.signature)) {
        chart.plot.destroy();
        chart.box.remove();
        chart = null;
      }
      if (!chart) {
        var box = document.createElement("div");
        box.className = "curve";
        box.dataset.group = group.id;
        this.grid.appendChild(box);
        var opts = {
          title: group.title + (built.series.some(function (s) { return heldOut(s.label); }) ? " · dotted: held-out" : ""),
          width: this.width(),
          height: 220,
          // Rates live in [0, 1]: a fixed axis keeps 0.5 → 0.6 from looking like a leap.
          scales: group.unit ? { x: { time: false }, y: { range: [0, 1] } } : { x: { time: false } },
          // Steps are whole numbers: ticks at whole steps only (no "1.2" between step 1 and step 2).
          axes: [
            this.mode === "time" ? { label: "seconds since start" } : { label: "step", incrs: STEP_INCRS },
            { values: tickLabels, size: 56 },
          ],
          series: built.series,
          bands: built.bands,
        };
        chart = this.charts[group.id] = { plot: new uPlot(opts, built.data, box), box: box, signature: built.signature };
      } else {
        chart.plot.setData(built.data);
      }
      chart.box.dataset.points = String(built.data[0].length);
    }, this);
    this.sortCharts();
  };

  // Keep the charts in GROUPS order however late their first point arrived.
  RunCurves.prototype.sortCharts = function () {
    GROUPS.forEach(function (group) {
      var chart = this.charts[group.id];
      if (chart) this.grid.appendChild(chart.box);
    }, this);
  };

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("run-curves");
    if (root && window.uPlot) root.runCurves = new RunCurves(root);
  });
})();
