// Charts of a table's snapshot summaries (uPlot, vendored). The data is in the page as JSON;
// without JavaScript the snapshot list shows the same numbers.
(function () {
  "use strict";
  var holder = document.getElementById("chart-data");
  if (!holder || typeof uPlot === "undefined") { return; }
  var data = JSON.parse(holder.textContent);
  data.series.forEach(function (series) {
    var target = document.getElementById("chart-" + series.key);
    if (!target) { return; }
    var width = Math.max(300, Math.min(640, target.clientWidth || 420));
    var options = {
      width: width,
      height: 200,
      series: [{}, { label: series.label, stroke: "#0b57d0", width: 2, points: { show: true, size: 6 } }],
      axes: [{}, { size: 70 }],
      legend: { show: true }
    };
    target.setAttribute("data-points", String(series.values.length));
    new uPlot(options, [data.x, series.values], target);
  });
})();
