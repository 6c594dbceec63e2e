// The dashboard's page: it follows the stream of snapshots of /events and
// shows a panel per pool, with its charts, options and recent events.
"use strict";

(function () {
  // Two minutes of history at four snapshots a second.
  const MAX_POINTS = 480;
  // The most events a pool's list shows.
  const MAX_EVENTS = 100;
  const CHART_HEIGHT = 150;

  const green = "#1f8f4e", blue = "#1f6fb2", orange = "#e08a00", red = "#c0392b",
    purple = "#6a3fb0", grey = "#8a93a0";

  // The charts of a pool: for each, its series, each with the function that
  // reads its value from the pool's snapshot.
  const CHARTS = {
    connections: [
      { label: "idle", stroke: green, value: (p) => p.idle },
      { label: "in use", stroke: blue, value: (p) => p.inUse, fill: "rgba(31,111,178,0.08)" },
      { label: "pending", stroke: orange, value: (p) => p.pending },
      { label: "maxPoolSize", stroke: grey, dash: [6, 4], value: (p) => maxPoolSize(p) },
    ],
    waiting: [
      { label: "waiting", stroke: red, value: (p) => p.waiting, fill: "rgba(192,57,43,0.08)" },
    ],
    wait: [
      { label: "p50", stroke: green, value: (p) => p.wait.p50 },
      { label: "p90", stroke: orange, value: (p) => p.wait.p90 },
      { label: "p99", stroke: red, value: (p) => p.wait.p99 },
    ],
    establish: [
      { label: "p50", stroke: green, value: (p) => p.establish.p50 },
      { label: "p90", stroke: orange, value: (p) => p.establish.p90 },
      { label: "p99", stroke: red, value: (p) => p.establish.p99 },
    ],
    rates: [
      { label: "events/s", stroke: purple, value: (p) => p.eventsPerSecond },
      { label: "check-outs/s", stroke: blue, value: (p) => p.checkOutsPerSecond },
    ],
  };

  const KIND = {
    ConnectionPoolCreated: "pool", ConnectionPoolReady: "pool", ConnectionPoolCleared: "pool", ConnectionPoolClosed: "pool",
    ConnectionCreated: "connection", ConnectionReady: "connection", ConnectionClosed: "connection",
    ConnectionCheckOutStarted: "checkout", ConnectionCheckedOut: "checkout", ConnectionCheckedIn: "checkout",
    ConnectionCheckOutFailed: "failure", ConnectionLeakSuspected: "failure",
  };

  const views = new Map(); // pool name → its panel
  const poolsEl = document.getElementById("pools");
  const emptyEl = document.getElementById("empty");
  const statusEl = document.getElementById("status");
  const updatedEl = document.getElementById("updated");
  const template = document.getElementById("pool-template");

  // What the page has received, for the curious and for the browser tests.
  const state = {
    frames: 0,
    connected: false,
    pools: {}, // name → {samples: snapshots charted}
    chartData(name, chart) {
      const v = views.get(name);
      return v && v.charts[chart] ? v.charts[chart].data : null;
    },
  };
  window.dashboardState = state;

  function maxPoolSize(p) {
    const o = p.options.find((o) => o.name === "maxPoolSize");
    const n = o ? Number(o.value) : NaN;
    return Number.isFinite(n) ? n : null;
  }

  function fmtMS(v) {
    if (v == null) return "–";
    if (v >= 1000) return (v / 1000).toPrecision(3) + " s";
    if (v >= 1) return v.toPrecision(3) + " ms";
    return (v * 1000).toPrecision(3) + " µs";
  }

  function fmtRate(v) {
    return v == null ? "–" : Math.round(v).toLocaleString("en-US");
  }

  function fmtTime(ms) {
    const d = new Date(ms);
    const two = (n) => String(n).padStart(2, "0");
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds()) + "." +
      String(d.getMilliseconds()).padStart(3, "0");
  }

  function chartWidth(el) {
    return Math.max(200, Math.floor(el.getBoundingClientRect().width));
  }

  // fmtValue formats a value of a chart's legend: a count or a rate as a
  // whole number, a time in milliseconds to three digits.
  function fmtValue(v) {
    if (v == null) return "–";
    if (Number.isInteger(v) || Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
    return String(Number(v.toPrecision(3)));
  }

  function newChart(el, series) {
    const opts = {
      width: chartWidth(el),
      height: CHART_HEIGHT,
      cursor: { drag: { x: false, y: false } },
      scales: {
        y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [{}, { size: 55 }],
      series: [{ label: "time", value: (u, ts) => (ts == null ? "–" : fmtTime(ts * 1000)) }].concat(series.map((s) => ({
        label: s.label, stroke: s.stroke, width: 1.5, fill: s.fill, dash: s.dash, spanGaps: false,
        points: { show: false }, value: (u, v) => fmtValue(v),
      }))),
    };
    const data = [[]].concat(series.map(() => []));
    return new uPlot(opts, data, el);
  }

  function newView(p) {
    const el = template.content.firstElementChild.cloneNode(true);
    el.dataset.pool = p.name;
    el.querySelector(".name").textContent = p.name;
    const v = {
      el,
      name: p.name,
      charts: {},
      x: [],
      poolEvents: [],
      events: [],
      checkOuts: [],
      eventsChanged: true,
      withCheckOuts: el.querySelector(".with-checkouts"),
    };
    v.withCheckOuts.addEventListener("change", () => {
      v.eventsChanged = true;
      renderEvents(v);
    });
    // Insert in the order of the names, as the snapshots list the pools.
    let before = null;
    for (const [name, o] of views) {
      if (name > p.name && (before === null || name < before.name)) before = o;
    }
    poolsEl.insertBefore(el, before ? before.el : null);
    for (const [name, series] of Object.entries(CHARTS)) {
      v.charts[name] = newChart(el.querySelector('[data-chart="' + name + '"]'), series);
    }
    views.set(p.name, v);
    state.pools[p.name] = { samples: 0 };
    return v;
  }

  function dropView(v) {
    for (const c of Object.values(v.charts)) c.destroy();
    v.el.remove();
    views.delete(v.name);
    delete state.pools[v.name];
  }

  // plot adds the pool's snapshot at time t to its charts.
  function plot(v, t, p) {
    v.x.push(t);
    const trim = v.x.length > MAX_POINTS;
    if (trim) v.x.shift();
    for (const [name, series] of Object.entries(CHARTS)) {
      const u = v.charts[name];
      const data = [v.x];
      series.forEach((s, i) => {
        const ys = u.data[i + 1];
        const y = s.value(p);
        ys.push(y == null ? null : y);
        if (trim) ys.shift();
        data.push(ys);
      });
      u.setData(data);
      // The legend shows the latest values, unless the pointer is on
      // the chart.
      if (u.cursor.left == null || u.cursor.left < 0) u.setLegend({ idx: v.x.length - 1 });
      u.root.parentElement.dataset.points = String(v.x.length);
    }
    state.pools[p.name].samples++;
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function fillTable(tbody, rows) {
    const trs = rows.map(([k, val, note]) => {
      const tr = document.createElement("tr");
      const td = cell(tr, k);
      if (note) {
        const span = document.createElement("span");
        span.className = "muted";
        span.textContent = " " + note;
        td.appendChild(span);
      }
      cell(tr, val);
      return tr;
    });
    tbody.replaceChildren(...trs);
  }

  function describe(e) {
    const parts = [];
    if (e.durationMs) parts.push(fmtMS(e.durationMs));
    if (e.reason) parts.push(e.reason);
    if (e.interruptInUse) parts.push("interruptInUse");
    if (e.serviceId) parts.push("service " + e.serviceId);
    if (e.error) parts.push(e.error);
    return parts.join(" · ");
  }

  function renderEvents(v) {
    if (!v.eventsChanged) return;
    v.eventsChanged = false;
    let list = v.events;
    if (v.withCheckOuts.checked) {
      list = v.events.concat(v.checkOuts).sort((a, b) => b.seq - a.seq).slice(0, MAX_EVENTS);
    }
    fillList(v.el.querySelector(".pool-events"), v.poolEvents);
    fillList(v.el.querySelector(".connection-events"), list);
  }

  function fillList(ol, list) {
    if (list.length === 0) {
      const li = document.createElement("li");
      li.className = "empty";
      li.textContent = "no event yet";
      ol.replaceChildren(li);
      return;
    }
    ol.replaceChildren(...list.map((e) => {
      const li = document.createElement("li");
      li.dataset.type = e.type;
      li.dataset.kind = KIND[e.type] || "other";
      li.title = e.error || "";
      const time = document.createElement("span");
      time.className = "muted";
      time.textContent = fmtTime(e.time) + " ";
      const type = document.createElement("span");
      type.className = "type";
      type.textContent = e.type;
      li.append(time, type);
      const rest = (e.connectionId ? " #" + e.connectionId : "") + (describe(e) ? "  " + describe(e) : "");
      if (rest) li.append(rest);
      return li;
    }));
  }

  // render shows the pool's figures, options and events as text.
  function render(v, p) {
    const el = v.el;
    el.querySelector(".address").textContent = p.name.endsWith("/" + p.address) ? "" : p.address;
    const st = el.querySelector(".state");
    st.textContent = p.state;
    st.dataset.state = p.state;
    el.querySelector(".generation").textContent = "generation " + p.generation;
    const max = maxPoolSize(p);
    el.querySelector(".summary").textContent = [
      "idle " + p.idle,
      "in use " + p.inUse,
      "pending " + p.pending,
      "total " + p.total + (max != null ? " / " + max : ""),
      "waiting " + p.waiting,
      "wait p50 " + fmtMS(p.wait.p50) + ", p99 " + fmtMS(p.wait.p99),
      fmtRate(p.eventsPerSecond) + " events/s",
      fmtRate(p.checkOutsPerSecond) + " check-outs/s",
    ].join(" · ");

    const warn = [];
    if (!p.listening) {
      warn.push("No event handler of this name has seen the pool's events: give the pool dashboard's EventHandler(name) to list them.");
    }
    if (p.droppedEvents > 0) {
      warn.push(p.droppedEvents.toLocaleString("en-US") + " events were left out of the list: the dashboard fell behind the pool.");
    }
    const w = el.querySelector(".warning");
    w.textContent = warn.join(" ");
    w.hidden = warn.length === 0;

    fillTable(el.querySelector(".options tbody"),
      p.options.map((o) => [o.name, o.value]));
    const t = p.totals;
    fillTable(el.querySelector(".totals tbody"), [
      ["connections created", t.created.toLocaleString("en-US")],
      ["connections closed", t.closed.toLocaleString("en-US")],
      ["establishments failed", t.establishFailed.toLocaleString("en-US")],
      ["check-outs", t.checkedOut.toLocaleString("en-US")],
      ["check-outs failed", t.checkOutFailed.toLocaleString("en-US")],
      ["of which timeouts", t.timeouts.toLocaleString("en-US")],
      ["clears", t.clears.toLocaleString("en-US")],
      ["leaks suspected", t.leaks.toLocaleString("en-US")],
      ["check-out wait p50 / p99", fmtMS(p.waitAllTime.p50) + " / " + fmtMS(p.waitAllTime.p99)],
      ["establishment p50 / p99", fmtMS(p.establishAllTime.p50) + " / " + fmtMS(p.establishAllTime.p99)],
    ]);

    if (p.poolEvents.length > 0) {
      v.poolEvents = p.poolEvents.concat(v.poolEvents).slice(0, MAX_EVENTS);
      v.eventsChanged = true;
    }
    if (p.events.length > 0) {
      v.events = p.events.concat(v.events).slice(0, MAX_EVENTS);
      v.eventsChanged = true;
    }
    if (p.checkOuts.length > 0) {
      v.checkOuts = p.checkOuts.concat(v.checkOuts).slice(0, MAX_EVENTS);
      if (v.withCheckOuts.checked) v.eventsChanged = true;
    }
    renderEvents(v);
  }

  function onFrame(s) {
    const t = s.time / 1000;
    const seen = new Set();
    for (const p of s.pools) {
      seen.add(p.name);
      const v = views.get(p.name) || newView(p);
      plot(v, t, p);
      render(v, p);
    }
    for (const v of Array.from(views.values())) {
      if (!seen.has(v.name)) dropView(v);
    }
    emptyEl.hidden = views.size > 0;
    updatedEl.textContent = "updated " + fmtTime(s.time);
    state.frames++;
  }

  function setStatus(s) {
    statusEl.dataset.state = s;
    statusEl.textContent = s;
    state.connected = s === "live";
  }

  const source = new EventSource("events");
  source.addEventListener("open", () => {
    setStatus("live");
    // A new stream lists the recent events from the start again.
    for (const v of views.values()) {
      v.poolEvents = [];
      v.events = [];
      v.checkOuts = [];
      v.eventsChanged = true;
    }
  });
  source.addEventListener("error", () => setStatus("disconnected"));
  source.addEventListener("message", (m) => onFrame(JSON.parse(m.data)));

  let resizing = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => {
      for (const v of views.values()) {
        for (const u of Object.values(v.charts)) {
          u.setSize({ width: chartWidth(u.root.parentElement), height: CHART_HEIGHT });
        }
      }
    }, 100);
  });
})();
