// squidbot web UI: the Usage panel's charts (tokens per day as SVG bars, tokens per model as
// DOM bars), each with a text table beside it, built from DOM nodes, never from markup.
'use strict';

(() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const DAYS = 30;

  function make(tag, attributes, ...children) {
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== undefined && value !== null) made.setAttribute(name, String(value));
    }
    for (const child of children) if (child !== undefined && child !== null) made.append(child);
    return made;
  }

  function svg(tag, attributes, ...children) {
    const made = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) made.setAttribute(name, String(value));
    for (const child of children) made.append(child instanceof Node ? child : String(child));
    return made;
  }

  // The last 30 UTC days, oldest first, `YYYY-MM-DD` as `usage.get {by: "day"}` names them.
  function lastDays(now) {
    const days = [];
    for (let back = DAYS - 1; back >= 0; back -= 1) {
      const day = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - back));
      days.push(day.toISOString().slice(0, 10));
    }
    return days;
  }

  // One bar per UTC day of the last 30, days without usage included, tallest at full
  // height. Screen readers get its name only: the table beside it says the same in text.
  function dayChart(rows, now) {
    const byDay = new Map(rows.map((row) => [row.key, row.tokens || 0]));
    const days = lastDays(now || new Date());
    const highest = Math.max(1, ...days.map((day) => byDay.get(day) || 0));
    const width = 600;
    const height = 160;
    const slot = width / days.length;
    const chart = svg('svg', { viewBox: '0 0 ' + width + ' ' + (height + 20), class: 'bars', role: 'img',
      'aria-label': 'tokens per day', 'data-testid': 'usage-day-chart' });
    days.forEach((day, index) => {
      const tokens = byDay.get(day) || 0;
      const barHeight = Math.round((tokens / highest) * height);
      const bar = svg('rect', { x: index * slot + 2, y: height - barHeight, width: slot - 4, height: barHeight,
        class: 'bar', 'data-day': day, 'data-tokens': tokens });
      bar.append(svg('title', {}, day + ': ' + tokens + ' tokens'));
      chart.append(bar);
      if (index % 5 === 4 || index === days.length - 1) {
        const last = index === days.length - 1;
        chart.append(svg('text', { x: last ? width : index * slot + slot / 2, y: height + 15, class: 'bar-label',
          'text-anchor': last ? 'end' : 'middle' }, day.slice(5)));
      }
    });
    return chart;
  }

  // The days that had usage, as a table: the chart's text alternative.
  function dayTable(rows) {
    const used = rows.filter((row) => (row.tokens || 0) > 0 || (row.calls || 0) > 0);
    const body = used.length
      ? used.map((row) => make('tr', { 'data-testid': 'usage-day', 'data-key': row.key },
        make('th', { scope: 'row' }, row.key), make('td', {}, String(row.calls ?? 0)),
        make('td', {}, String(row.tokens ?? 0))))
      : [make('tr', {}, make('td', { colspan: 3, class: 'muted' }, 'No usage yet.'))];
    return make('table', { class: 'table' },
      make('caption', { class: 'visually-hidden' }, 'Tokens per day, last 30 days'),
      make('thead', {}, make('tr', {}, make('th', { scope: 'col' }, 'Day'), make('th', { scope: 'col' }, 'Calls'),
        make('th', { scope: 'col' }, 'Tokens'))),
      make('tbody', {}, ...body));
  }

  // One horizontal bar per model, widest first, its token count written beside it, so the
  // chart reads as a list without the picture.
  function modelChart(rows) {
    const sorted = [...rows].sort((a, b) => (b.tokens || 0) - (a.tokens || 0));
    if (!sorted.length) return make('p', { class: 'muted' }, 'No usage yet.');
    const highest = Math.max(1, ...sorted.map((row) => row.tokens || 0));
    return make('ul', { class: 'hbars', 'aria-label': 'Tokens per model', 'data-testid': 'usage-model-chart' },
      ...sorted.map((row) => {
        const tokens = row.tokens || 0;
        const fill = make('span', { class: 'hbar-fill', 'aria-hidden': 'true' });
        fill.style.width = Math.max(1, Math.round((tokens / highest) * 100)) + '%';
        return make('li', { class: 'hbar', 'data-key': row.key, 'data-tokens': tokens },
          make('span', { class: 'hbar-name' }, row.key),
          make('span', { class: 'hbar-track' }, fill),
          make('span', { class: 'hbar-value' }, tokens + ' tokens'));
      }));
  }

  window.squidUsage = Object.freeze({ dayChart, dayTable, modelChart });
})();
