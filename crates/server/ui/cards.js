// squidbot web UI: the transcript's cards (tool calls, thinking, running sub-agents), built
// from DOM nodes; tool arguments and results are shown as plain text, never as markup.
'use strict';

(() => {
  // Result text shown before "Show more"; the rest stays out of the DOM until asked for.
  const RESULT_PREVIEW = 2000;
  const SUMMARY_LENGTH = 80;
  let nextRegion = 0;

  function make(tag, attributes, ...children) {
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== undefined && value !== null) made.setAttribute(name, String(value));
    }
    for (const child of children) if (child !== undefined && child !== null) made.append(child);
    return made;
  }

  // A button that shows and hides `region` (hidden at first unless `open`).
  function toggle(label, region, options) {
    nextRegion += 1;
    region.id = 'sqb-region-' + nextRegion;
    const open = Boolean(options && options.open);
    region.hidden = !open;
    const button = make('button', { type: 'button', class: 'card-toggle', 'aria-expanded': String(open),
      'aria-controls': region.id, 'data-testid': options && options.testid }, label);
    button.addEventListener('click', () => {
      region.hidden = !region.hidden;
      button.setAttribute('aria-expanded', String(!region.hidden));
    });
    return button;
  }

  function prettyArguments(args) {
    if (args === undefined || args === null || args === '') return '';
    let value = args;
    if (typeof value === 'string') {
      try { value = JSON.parse(value); } catch { return args; }
    }
    return JSON.stringify(value, null, 2);
  }

  function compact(text) {
    const line = text.replace(/\s+/g, ' ').trim();
    return line.length > SUMMARY_LENGTH ? line.slice(0, SUMMARY_LENGTH) + '…' : line;
  }

  function formatMilliseconds(milliseconds) {
    const value = Number(milliseconds);
    if (!Number.isFinite(value) || value < 0) return '';
    return value < 1000 ? Math.round(value) + ' ms' : (value / 1000).toFixed(value < 10000 ? 1 : 0) + ' s';
  }

  const STATUS_TEXT = { running: 'running…', ok: 'ok', error: 'error', stopped: 'stopped' };

  // A tool call: name, status, duration, then its arguments and result behind toggles.
  function toolCard(call) {
    const args = prettyArguments(call.args);
    const card = make('div', { class: 'tool-card', 'data-testid': 'tool-card', 'data-tool': call.name || 'tool',
      'data-call-id': call.callId, 'data-state': 'running' });
    const argumentsBlock = make('pre', { class: 'tool-arguments', 'data-testid': 'tool-arguments' }, args || '{}');
    const resultRegion = make('div', { class: 'tool-result-region' });
    const resultToggle = toggle('Result', resultRegion, { testid: 'tool-result-toggle' });
    resultToggle.hidden = true;
    card.append(
      make('div', { class: 'tool-head' },
        make('span', { class: 'tool-name' }, call.name || 'tool'),
        make('span', { class: 'tool-status', 'data-testid': 'tool-status' }, STATUS_TEXT.running),
        make('span', { class: 'tool-duration', 'data-testid': 'tool-duration' })),
      make('div', { class: 'tool-toggles' },
        toggle('Arguments', argumentsBlock, { testid: 'tool-arguments-toggle' }),
        make('code', { class: 'tool-summary' }, compact(args)),
        resultToggle),
      argumentsBlock,
      resultRegion);
    if (call.state) setToolState(card, call.state, call.durationMs);
    return card;
  }

  // `state`: running, ok, error or stopped.
  function setToolState(card, state, durationMs) {
    card.dataset.state = state;
    card.querySelector('.tool-status').textContent = STATUS_TEXT[state] || state;
    if (durationMs !== undefined && durationMs !== null) {
      card.querySelector('.tool-duration').textContent = formatMilliseconds(durationMs);
    }
  }

  // The tool's output as text in a <pre>, its first part shown until "Show more".
  function setToolResult(card, text, options) {
    const result = String(text);
    const open = Boolean(options && options.open);
    const region = card.querySelector('.tool-result-region');
    const toggleButton = card.querySelector('[data-testid="tool-result-toggle"]');
    const pre = make('pre', { class: 'tool-result', 'data-testid': 'tool-result' }, result.slice(0, RESULT_PREVIEW));
    region.replaceChildren(pre);
    if (result.length > RESULT_PREVIEW) {
      const more = make('button', { type: 'button', class: 'card-toggle', 'data-testid': 'tool-result-more',
        'aria-expanded': 'false' }, 'Show more (' + (result.length - RESULT_PREVIEW) + ' more characters)');
      more.addEventListener('click', () => {
        const expanded = more.getAttribute('aria-expanded') === 'true';
        pre.textContent = expanded ? result.slice(0, RESULT_PREVIEW) : result;
        more.setAttribute('aria-expanded', String(!expanded));
        more.textContent = expanded ? 'Show more (' + (result.length - RESULT_PREVIEW) + ' more characters)' : 'Show less';
      });
      region.append(more);
    }
    card.dataset.result = 'shown';
    toggleButton.hidden = false;
    if (open) {
      region.hidden = false;
      toggleButton.setAttribute('aria-expanded', 'true');
    }
  }

  // Reasoning the model shared, dimmed and folded; `update` replaces its text as it streams.
  function thinkingBlock(text) {
    const body = make('div', { class: 'thinking-text', 'data-testid': 'thinking-text' }, text || '');
    const block = make('div', { class: 'thinking', 'data-testid': 'thinking' },
      toggle('Thinking', body, { testid: 'thinking-toggle' }), body);
    return block;
  }

  function updateThinking(block, text) {
    block.querySelector('.thinking-text').textContent = text;
  }

  // The running sub-agents as list items: role, task, status line, elapsed time.
  function workerItems(workers) {
    return workers.map((worker) => make('li', { class: 'worker', 'data-testid': 'worker', 'data-id': worker.id,
      'data-state': worker.state },
    make('span', { class: 'worker-role' }, worker.role || 'worker'),
    make('span', { class: 'worker-task' }, compact(String(worker.task || ''))),
    make('span', { class: 'worker-status muted' }, [worker.status, formatMilliseconds(worker.elapsedMs)]
      .filter(Boolean).join(' · '))));
  }

  window.squidCards = Object.freeze({ toolCard, setToolState, setToolResult, thinkingBlock, updateThinking,
    workerItems, prettyArguments });
})();
