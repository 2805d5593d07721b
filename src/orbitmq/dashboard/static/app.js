// Charts of the cluster page: the dashboard's last hour of samples (/api/history), drawn
// with uPlot and refreshed every 10 seconds. No other page runs a script.
(function () {
  "use strict";
  var tpsBox = document.getElementById("chart-tps");
  var lagBox = document.getElementById("chart-lag");
  if (!tpsBox || !lagBox || typeof uPlot === "undefined") {
    return;
  }
  var charts = null;

  function options(box, series) {
    return {
      width: Math.max(box.clientWidth - 10, 300),
      height: 220,
      series: [{}].concat(series),
      axes: [{}, { size: 60 }],
    };
  }

  function draw(data) {
    var tps = [data.time_s, data.produce_tps, data.consume_tps];
    var lag = [data.time_s, data.lag_messages];
    if (charts === null) {
      charts = [
        new uPlot(options(tpsBox, [
          { label: "produce", stroke: "#1c64d1", width: 2 },
          { label: "consume", stroke: "#067647", width: 2 },
        ]), tps, tpsBox),
        new uPlot(options(lagBox, [{ label: "lag", stroke: "#b42318", width: 2 }]), lag, lagBox),
      ];
    } else {
      charts[0].setData(tps);
      charts[1].setData(lag);
    }
  }

  function refresh() {
    fetch("/api/history", { headers: { Accept: "application/json" } })
      .then(function (response) { return response.json(); })
      .then(draw)
      .catch(function () { /* the next refresh tries again */ });
  }

  refresh();
  window.setInterval(refresh, 10000);
})();
