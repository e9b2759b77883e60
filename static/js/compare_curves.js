/* Training curves of the compare page, overlaid: OSR and average searches per training step, one line per run.
 *
 * The page holds the data as JSON (<script id="compare-curves-data">): [{run, label, series: {"osr_redundant":
 * [[step, value], ...], "osr": [...], "searches/mean": [...]}}], drawn with the vendored uPlot (static/vendor/uplot) as
 * static/js/run_curves.js draws a run's own curves. A run without a key's points has no line in that chart.
 */
(function () {
  "use strict";

  var CHARTS = [
    { key: "osr_redundant", title: "Redundant-search rate per training step", unit: true },
    { key: "osr", title: "Over-search rate (OSR) per training step", unit: true },
    { key: "searches/mean", title: "Average searches per trajectory per training step" },
  ];
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

  function columns(curves, key) {
    var steps = {};
    curves.forEach(function (c) { (c.series[key] || []).forEach(function (p) { steps[p[0]] = true; }); });
    var xs = Object.keys(steps).map(Number).sort(function (a, b) { return a - b; });
    var data = [xs];
    var series = [{ label: "step" }];
    curves.forEach(function (c, i) {
      var byStep = {};
      (c.series[key] || []).forEach(function (p) { byStep[p[0]] = p[1]; });
      if (!(c.series[key] || []).length) return;
      data.push(xs.map(function (x) { return x in byStep ? byStep[x] : null; }));
      series.push({ label: c.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, points: { show: xs.length < 40 } });
    });
    return { data: data, series: series };
  }

  document.addEventListener("DOMContentLoaded", function () {
    var holder = document.getElementById("compare-curves-data");
    var grid = document.querySelector("#compare-curves [data-charts]");
    if (!holder || !grid || !window.uPlot) return;
    var curves = JSON.parse(holder.textContent);
    var width = Math.max(320, Math.min(560, grid.clientWidth / 2 - 16));
    CHARTS.forEach(function (chart) {
      var built = columns(curves, chart.key);
      if (built.series.length < 2) return;
      var box = document.createElement("div");
      box.className = "compare-chart";
      box.dataset.key = chart.key;
      box.dataset.lines = String(built.series.length - 1);
      grid.appendChild(box);
      new uPlot({
        title: chart.title,
        width: width,
        height: 220,
        scales: chart.unit ? { x: { time: false }, y: { range: [0, 1] } } : { x: { time: false } },
        // whole steps on the x axis, however few (uPlot's default increments would put ticks at 1.25, 1.5, …)
        axes: [{ label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, { size: 56 }],
        series: built.series,
      }, built.data, box);
    });
  });
})();
