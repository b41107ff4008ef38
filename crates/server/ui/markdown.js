// squidbot web UI: a Markdown renderer of our own that builds DOM nodes and never parses markup.
// Model and tool text reaches the page only as text nodes and allowlisted attributes: raw
// HTML shows as the text it is, links go only to http, https and mailto, images stay links.
'use strict';

(() => {
  // Nesting (quotes, lists, emphasis) deeper than this renders as text: it bounds the work
  // per character, so rendering stays linear in the text's length.
  const MAX_DEPTH = 8;
  // Link destinations and titles longer than this, or with parentheses nested deeper, are
  // not links (bounds each scan).
  const MAX_DESTINATION = 2048;
  const MAX_PARENTHESES = 8;

  const TAGS = new Set([
    'a', 'blockquote', 'br', 'button', 'code', 'del', 'div', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'li',
    'ol', 'p', 'pre', 'span', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul',
  ]);
  const ATTRIBUTES = new Set(['aria-label', 'class', 'data-language', 'data-state', 'href', 'rel', 'start', 'target',
    'title', 'type']);

  // The one place elements are made: tags and attributes outside the lists are refused, and
  // an href must have passed `safeHref`.
  function element(tag, attributes, ...children) {
    if (!TAGS.has(tag)) throw new Error('markdown: tag ' + tag + ' is not allowed');
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === undefined || value === null) continue;
      if (!ATTRIBUTES.has(name)) throw new Error('markdown: attribute ' + name + ' is not allowed');
      if (name === 'href' && safeHref(value) !== value) throw new Error('markdown: unsafe href');
      made.setAttribute(name, String(value));
    }
    for (const child of children) made.append(child);
    return made;
  }

  // An absolute http(s) or mailto URL, normalized (quotes and angle brackets escaped), or
  // null. Relative URLs, other schemes and anything the URL parser rewrites into another
  // scheme (`java\tscript:`) are refused.
  function safeHref(raw) {
    const text = String(raw).trim();
    if (!/^(?:https?:\/\/[^\s/?#]|mailto:[^\s])/i.test(text)) return null;
    let url;
    try { url = new URL(text); } catch { return null; }
    if (url.protocol === 'mailto:') return url.href;
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) return null;
    return url.href;
  }

  function link(href, ...children) {
    return element('a', { href, target: '_blank', rel: 'noopener noreferrer' }, ...children);
  }

  // inline

  const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0', copy: '©', reg: '®',
    hellip: '…', mdash: '—', ndash: '–', laquo: '«', raquo: '»', times: '×', middot: '·', deg: '°' };
  const ENTITY = /&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z]{2,8});/y;
  const AUTOLINK = /<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/y;
  const BARE_URL = /https?:\/\/[^\s<>]+/y;
  const PUNCTUATION = /[!-/:-@[-`{-~]/;
  const SPECIAL = new Set(['\\', '`', '*', '_', '~', '[', '!', '<', '&', '\n', 'h']);

  const isSpace = (character) => character === undefined || /\s/.test(character);
  const isWordCharacter = (character) => character !== undefined && /[\p{L}\p{N}]/u.test(character);

  function decodeEntity(name) {
    if (name[0] !== '#') return Object.prototype.hasOwnProperty.call(ENTITIES, name) ? ENTITIES[name] : null;
    const point = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
    if (!point || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff)) return '\ufffd';
    return String.fromCodePoint(point);
  }

  // Inline Markdown of one block (its lines joined by newlines). Every scan is cached so that
  // each character is looked at a bounded number of times per nesting level.
  class Inline {
    constructor(source) {
      this.source = source;
      this.brackets = matchBrackets(source);
      this.closers = new Map();
      this.backticks = new Map();
    }

    render(depth) {
      const fragment = document.createDocumentFragment();
      this.into(fragment, 0, this.source.length, depth, false);
      return fragment;
    }

    // The first run of exactly `length` backticks at or after `from`, or -1.
    backtickRun(from, length) {
      const cached = this.backticks.get(length);
      if (cached && cached.from <= from && (cached.found === -1 || cached.found >= from)) return cached.found;
      const source = this.source;
      let found = -1;
      for (let index = source.indexOf('`', from); index !== -1; index = source.indexOf('`', index)) {
        let end = index;
        while (source[end] === '`') end += 1;
        if (end - index === length) { found = index; break; }
        index = end;
      }
      this.backticks.set(length, { from, found });
      return found;
    }

    // The first run of exactly `delimiter` at or after `from` that can close emphasis (not
    // after whitespace; `_` not inside a word), or -1. Whether a run can close depends only
    // on its own surroundings, so one answer serves every opener before it.
    closer(delimiter, from) {
      const cached = this.closers.get(delimiter);
      if (cached && cached.from <= from && (cached.found === -1 || cached.found >= from)) return cached.found;
      const source = this.source;
      const character = delimiter[0];
      let found = -1;
      for (let index = source.indexOf(delimiter, from); index !== -1; index = source.indexOf(delimiter, index)) {
        let end = index;
        while (source[end] === character) end += 1;
        const fits = end - index === delimiter.length && !isSpace(source[index - 1])
          && !(character === '_' && isWordCharacter(source[end]));
        if (fits) { found = index; break; }
        index = end;
      }
      this.closers.set(delimiter, { from, found });
      return found;
    }

    // Renders source[start, end) into `parent`.
    into(parent, start, end, depth, inLink) {
      const source = this.source;
      let text = '';
      const flush = () => { if (text) { parent.append(text); text = ''; } };
      const emit = (node) => { flush(); parent.append(node); };
      let index = start;
      while (index < end) {
        const character = source[index];
        if (!SPECIAL.has(character)) {
          let stop = index + 1;
          while (stop < end && !SPECIAL.has(source[stop])) stop += 1;
          text += source.slice(index, stop);
          index = stop;
          continue;
        }
        if (character === '\\') {
          const next = source[index + 1];
          if (next === '\n' && index + 1 < end) { emit(element('br')); index += 2; continue; }
          if (next !== undefined && index + 1 < end && PUNCTUATION.test(next)) { text += next; index += 2; continue; }
          text += '\\';
          index += 1;
          continue;
        }
        if (character === '\n') {
          text = text.replace(/[ \t]+$/, '');
          emit(element('br'));
          index += 1;
          continue;
        }
        if (character === '`') {
          let run = index;
          while (source[run] === '`') run += 1;
          const length = run - index;
          const close = this.backtickRun(run, length);
          if (close !== -1 && close + length <= end) {
            let code = source.slice(run, close).replace(/\n/g, ' ');
            if (code.length > 2 && code[0] === ' ' && code[code.length - 1] === ' ' && code.trim()) code = code.slice(1, -1);
            emit(element('code', {}, code));
            index = close + length;
          } else {
            text += source.slice(index, run);
            index = run;
          }
          continue;
        }
        if (character === '*' || character === '_' || character === '~') {
          let run = index;
          while (source[run] === character) run += 1;
          const length = run - index;
          const opens = depth < MAX_DEPTH && !isSpace(source[run])
            && !(character === '_' && isWordCharacter(source[index - 1]))
            && (character !== '~' || length === 2) && length <= 3;
          if (opens) {
            const delimiter = character.repeat(length);
            const close = this.closer(delimiter, run + 1);
            if (close !== -1 && close + length <= end) {
              const wrapper = element(character === '~' ? 'del' : length === 1 ? 'em' : 'strong');
              const inner = length === 3 ? element('em') : wrapper;
              if (inner !== wrapper) wrapper.append(inner);
              this.into(inner, run, close, depth + 1, inLink);
              emit(wrapper);
              index = close + length;
              continue;
            }
          }
          text += source.slice(index, run);
          index = run;
          continue;
        }
        if (character === '[' || (character === '!' && source[index + 1] === '[')) {
          const image = character === '!';
          const open = image ? index + 1 : index;
          const consumed = inLink || depth >= MAX_DEPTH ? null : this.link(parent, open, end, depth, image, flush);
          if (consumed !== null) { index = consumed; continue; }
          text += character;
          index += 1;
          continue;
        }
        if (character === '<') {
          AUTOLINK.lastIndex = index;
          const match = inLink ? null : AUTOLINK.exec(source);
          if (match && index + match[0].length <= end) {
            const target = match[1].includes(':') ? match[1] : 'mailto:' + match[1];
            const href = safeHref(target);
            if (href) { emit(link(href, match[1])); index += match[0].length; continue; }
          }
          text += '<';
          index += 1;
          continue;
        }
        if (character === '&') {
          ENTITY.lastIndex = index;
          const match = ENTITY.exec(source);
          const decoded = match && index + match[0].length <= end ? decodeEntity(match[1]) : null;
          if (decoded !== null) { text += decoded; index += match[0].length; continue; }
          text += '&';
          index += 1;
          continue;
        }
        // 'h': a bare http(s) URL at a word start.
        if (!inLink && !isWordCharacter(source[index - 1]) && source.startsWith('http', index)) {
          BARE_URL.lastIndex = index;
          const match = BARE_URL.exec(source);
          if (match) {
            const url = trimUrl(match[0].slice(0, end - index));
            const href = safeHref(url);
            if (href) { emit(link(href, url)); index += url.length; continue; }
          }
        }
        text += character;
        index += 1;
      }
      flush();
    }

    // `[text](destination "title")` at `open` (`![alt](…)` when `image`): appends a link and
    // returns the index after it, or returns null when there is no well-formed link there.
    // A link to anything but http, https or mailto is shown as its source text.
    link(parent, open, end, depth, image, flush) {
      const source = this.source;
      const close = this.brackets.get(open);
      if (close === undefined || close >= end || source[close + 1] !== '(') return null;
      const destination = parseDestination(source, close + 2, Math.min(end, close + 2 + MAX_DESTINATION));
      if (!destination) return null;
      const start = image ? open - 1 : open;
      flush();
      const href = safeHref(destination.url);
      if (!href) {
        parent.append(source.slice(start, destination.end));
        return destination.end;
      }
      const title = destination.title || undefined;
      if (image) {
        // Never loaded: a remote image would tell its server who reads the reply.
        const label = source.slice(open + 1, close).trim();
        const anchor = link(href, 'image: ' + (label || destination.url));
        anchor.className = 'md-image-link';
        if (title) anchor.setAttribute('title', title);
        parent.append(anchor);
      } else {
        const anchor = link(href);
        if (title) anchor.setAttribute('title', title);
        this.into(anchor, open + 1, close, depth + 1, true);
        if (!anchor.firstChild) anchor.append(destination.url);
        parent.append(anchor);
      }
      return destination.end;
    }
  }

  // Each `[` paired with its `]` (backslash escapes skipped), in one pass.
  function matchBrackets(source) {
    const pairs = new Map();
    const open = [];
    for (let index = 0; index < source.length; index += 1) {
      const character = source[index];
      if (character === '\\') index += 1;
      else if (character === '[') open.push(index);
      else if (character === ']' && open.length) pairs.set(open.pop(), index);
    }
    return pairs;
  }

  // The first `character` in source[from, limit), or -1.
  function find(source, character, from, limit) {
    for (let index = from; index < limit; index += 1) if (source[index] === character) return index;
    return -1;
  }

  // `url`, `<url>`, each optionally followed by a quoted title, then `)`.
  function parseDestination(source, from, limit) {
    let index = from;
    while (index < limit && (source[index] === ' ' || source[index] === '\t')) index += 1;
    let url;
    if (source[index] === '<') {
      // No line break nor another `<` inside the brackets.
      let close = index + 1;
      while (close < limit && source[close] !== '>' && source[close] !== '<' && source[close] !== '\n') close += 1;
      if (source[close] !== '>' || close >= limit) return null;
      url = source.slice(index + 1, close);
      index = close + 1;
    } else {
      let nesting = 0;
      const begin = index;
      while (index < limit) {
        const character = source[index];
        if (character === '\\' && index + 1 < limit) { index += 2; continue; }
        if (/\s/.test(character)) break;
        if (character === '(' && ++nesting > MAX_PARENTHESES) return null;
        if (character === ')') { if (nesting === 0) break; nesting -= 1; }
        index += 1;
      }
      url = source.slice(begin, index).replace(/\\([!-/:-@[-`{-~])/g, '$1');
    }
    while (index < limit && /[ \t\n]/.test(source[index])) index += 1;
    let title = '';
    const quote = source[index];
    if (quote === '"' || quote === "'" || quote === '(') {
      const closing = quote === '(' ? ')' : quote;
      const close = find(source, closing, index + 1, limit);
      if (close === -1) return null;
      title = source.slice(index + 1, close);
      index = close + 1;
      while (index < limit && /[ \t\n]/.test(source[index])) index += 1;
    }
    if (source[index] !== ')' || index >= limit) return null;
    return { url, title, end: index + 1 };
  }

  // A bare URL without the sentence punctuation after it, nor a `)` it doesn't open.
  function trimUrl(url) {
    let end = url.length;
    for (;;) {
      const last = url[end - 1];
      if ('.,:;!?\'"*_~'.includes(last)) { end -= 1; continue; }
      if (last === ')') {
        const kept = url.slice(0, end);
        if ((kept.match(/\(/g) || []).length < (kept.match(/\)/g) || []).length) { end -= 1; continue; }
      }
      break;
    }
    return url.slice(0, end);
  }

  // code highlighting

  const C_LIKE = {
    comment: '//[^\\n]*|/\\*[\\s\\S]*?(?:\\*/|$)',
    string: '"(?:[^"\\\\\\n]|\\\\.)*"?|\'(?:[^\'\\\\\\n]|\\\\.)*\'?',
  };
  const HASH = { comment: '#[^\\n]*', string: C_LIKE.string };
  const words = (list) => new Set(list.split(' '));
  const LANGUAGES = {
    javascript: {
      ...C_LIKE, string: C_LIKE.string + '|`(?:[^`\\\\]|\\\\[\\s\\S])*`?',
      keywords: words('async await break case catch class const continue default delete do else export extends false '
        + 'finally for from function if import in instanceof let new null of return static super switch this throw '
        + 'true try typeof undefined var void while yield interface type enum implements readonly as'),
    },
    rust: {
      ...C_LIKE, string: '"(?:[^"\\\\]|\\\\.)*"?|\'(?:[^\'\\\\\\n]|\\\\.)\'',
      keywords: words('as async await break const continue crate dyn else enum extern false fn for if impl in let loop '
        + 'match mod move mut pub ref return self Self static struct super trait true type unsafe use where while '
        + 'Some None Ok Err'),
    },
    python: {
      comment: HASH.comment,
      string: '"""[\\s\\S]*?(?:"""|$)|\'\'\'[\\s\\S]*?(?:\'\'\'|$)|' + C_LIKE.string,
      keywords: words('and as assert async await break class continue def del elif else except False finally for from '
        + 'global if import in is lambda None nonlocal not or pass raise return True try while with yield self'),
    },
    shell: {
      ...HASH,
      keywords: words('if then else elif fi for while until do done case esac in function return export local '
        + 'readonly set unset echo exit cd'),
    },
    go: {
      ...C_LIKE, string: C_LIKE.string + '|`[^`]*`?',
      keywords: words('break case chan const continue default defer else fallthrough for func go goto if import '
        + 'interface map package range return select struct switch type var nil true false'),
    },
    c: {
      ...C_LIKE,
      keywords: words('auto break case char class const continue default do double else enum extern false float for '
        + 'goto if int long namespace new nullptr private protected public return short signed sizeof static struct '
        + 'switch template this true typedef union unsigned using virtual void volatile while boolean extends final '
        + 'implements import package throws try catch throw'),
    },
    json: { string: '"(?:[^"\\\\\\n]|\\\\.)*"?', keywords: words('true false null') },
    yaml: { ...HASH, keywords: words('true false null yes no on off') },
    toml: { ...HASH, keywords: words('true false') },
    sql: {
      comment: '--[^\\n]*|/\\*[\\s\\S]*?(?:\\*/|$)', string: '\'(?:[^\']|\'\')*\'?',
      keywords: words('select from where and or not insert into values update set delete create table index drop '
        + 'alter join left right inner outer on as group by order having limit offset null is in like distinct '
        + 'primary key references default union all case when then else end'),
      caseless: true,
    },
    html: { comment: '<!--[\\s\\S]*?(?:-->|$)', string: '"[^"]*"?|\'[^\']*\'?', tag: '</?[A-Za-z][\\w:-]*|/?>' },
  };
  const ALIASES = {
    js: 'javascript', jsx: 'javascript', mjs: 'javascript', cjs: 'javascript', ts: 'javascript', tsx: 'javascript',
    typescript: 'javascript', rs: 'rust', py: 'python', sh: 'shell', bash: 'shell', zsh: 'shell', console: 'shell',
    golang: 'go', cpp: 'c', 'c++': 'c', h: 'c', hpp: 'c', java: 'c', cs: 'c', csharp: 'c', kotlin: 'c', swift: 'c',
    yml: 'yaml', xml: 'html', svg: 'html',
  };
  const patterns = new Map();

  function pattern(language) {
    if (!patterns.has(language)) {
      const spec = LANGUAGES[language];
      // Groups 1 to 5: comment, string, tag, number, word; a group a language lacks never matches.
      const parts = ['comment', 'string', 'tag'].map((kind) => '(' + (spec[kind] || '(?!)') + ')');
      parts.push('(\\b\\d[\\w.]*)', '([A-Za-z_$][\\w$]*)');
      patterns.set(language, new RegExp(parts.join('|'), 'g'));
    }
    return patterns.get(language);
  }

  // `code` as text nodes and token spans; unknown languages stay plain text.
  function highlight(code, language) {
    const name = ALIASES[language] || language;
    const spec = LANGUAGES[name];
    const fragment = document.createDocumentFragment();
    if (!spec) { fragment.append(code); return fragment; }
    const expression = pattern(name);
    expression.lastIndex = 0;
    let last = 0;
    const token = (kind, value) => element('span', { class: 'tok-' + kind }, value);
    for (let match = expression.exec(code); match; match = expression.exec(code)) {
      if (!match[0]) { expression.lastIndex += 1; continue; }
      let node = null;
      if (match[1] !== undefined) node = token('comment', match[1]);
      else if (match[2] !== undefined) node = token('string', match[2]);
      else if (match[3] !== undefined) node = token('tag', match[3]);
      else if (match[4] !== undefined) node = token('number', match[4]);
      else if (spec.keywords && spec.keywords.has(spec.caseless ? match[5].toLowerCase() : match[5])) {
        node = token('keyword', match[5]);
      }
      if (!node) continue;
      if (match.index > last) fragment.append(code.slice(last, match.index));
      fragment.append(node);
      last = match.index + match[0].length;
    }
    if (last < code.length) fragment.append(code.slice(last));
    return fragment;
  }

  async function copyCode(button, code) {
    const text = code.textContent;
    let copied = false;
    try {
      if (navigator.clipboard && navigator.clipboard.writeText) {
        await navigator.clipboard.writeText(text);
        copied = true;
      }
    } catch {
      copied = false;
    }
    if (!copied) {
      // Without clipboard access (plain http on another host): select it for Ctrl+C.
      const range = document.createRange();
      range.selectNodeContents(code);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    button.dataset.state = copied ? 'copied' : 'selected';
    button.textContent = copied ? 'Copied' : 'Selected, press Ctrl+C';
    clearTimeout(button.resetTimer);
    button.resetTimer = setTimeout(() => { button.dataset.state = 'idle'; button.textContent = 'Copy'; }, 2000);
  }

  function codeBlock(body, info) {
    const language = (info.match(/^[A-Za-z0-9_+#.-]{1,24}/) || [''])[0].toLowerCase();
    const code = element('code', { class: language ? 'language-' + language : undefined }, highlight(body, language));
    const button = element('button', { type: 'button', class: 'md-copy', 'aria-label': 'Copy code', 'data-state': 'idle' },
      'Copy');
    button.addEventListener('click', () => copyCode(button, code));
    // Long lines scroll sideways; focusable, the keyboard can scroll them too.
    const pre = element('pre', {}, code);
    pre.tabIndex = 0;
    return element('div', { class: 'md-code', 'data-language': language || undefined },
      element('div', { class: 'md-code-bar' }, element('span', { class: 'md-code-language' }, language || 'text'), button),
      pre);
  }

  // blocks

  const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]|$)/;
  const RULE = /^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$/;
  const QUOTE = /^ {0,3}>/;
  const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+|$)/;
  const blank = (line) => !/\S/.test(line);
  const indentOf = (line) => line.length - line.trimStart().length;

  function opensFence(line) {
    const match = FENCE.exec(line);
    return match && !(match[2][0] === '`' && match[3].includes('`')) ? match : null;
  }

  function splitCells(line) {
    let row = line.trim();
    if (row.startsWith('|')) row = row.slice(1);
    if (row.endsWith('|') && !row.endsWith('\\|')) row = row.slice(0, -1);
    const cells = [];
    let cell = '';
    for (let index = 0; index < row.length; index += 1) {
      if (row[index] === '\\' && row[index + 1] === '|') { cell += '|'; index += 1; } else if (row[index] === '|') {
        cells.push(cell.trim());
        cell = '';
      } else cell += row[index];
    }
    cells.push(cell.trim());
    return cells;
  }

  // The alignments of a GFM delimiter row (`| --- | :-: |`), or null.
  function delimiterRow(line) {
    if (line === undefined || !line.includes('-')) return null;
    const cells = splitCells(line);
    if (!cells.every((cell) => /^:?-+:?$/.test(cell))) return null;
    return cells.map((cell) => {
      if (cell.startsWith(':') && cell.endsWith(':')) return 'center';
      if (cell.endsWith(':')) return 'right';
      return cell.startsWith(':') ? 'left' : '';
    });
  }

  function startsTable(lines, index) {
    if (!lines[index].includes('|')) return false;
    const aligns = delimiterRow(lines[index + 1]);
    return Boolean(aligns) && aligns.length === splitCells(lines[index]).length;
  }

  function interrupts(lines, index) {
    const line = lines[index];
    return opensFence(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)
      || (LIST_ITEM.test(line) && !blank(line.replace(LIST_ITEM, ''))) || startsTable(lines, index);
  }

  // Splits lines into top-level block descriptors: `{ kind, from, to, … }` with `to` exclusive.
  function scan(lines) {
    const blocks = [];
    let index = 0;
    while (index < lines.length) {
      const line = lines[index];
      const from = index;
      if (blank(line)) { index += 1; continue; }
      const fence = opensFence(line);
      if (fence) {
        const [, indent, marker, info] = fence;
        const body = [];
        index += 1;
        while (index < lines.length) {
          const closing = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[index]);
          if (closing && closing[1][0] === marker[0] && closing[1].length >= marker.length) { index += 1; break; }
          const current = lines[index];
          body.push(current.slice(Math.min(indent.length, indentOf(current))));
          index += 1;
        }
        blocks.push({ kind: 'code', from, to: index, body: body.join('\n'), info: info.trim() });
      } else if (HEADING.test(line)) {
        let text = line.trim().replace(/^#{1,6}/, '').trim();
        const hashes = /(?:^|[ \t])#+$/.exec(text);
        if (hashes) text = text.slice(0, hashes.index).trim();
        blocks.push({ kind: 'heading', from, to: index + 1, level: HEADING.exec(line)[1].length, text });
        index += 1;
      } else if (RULE.test(line)) {
        blocks.push({ kind: 'rule', from, to: index + 1 });
        index += 1;
      } else if (QUOTE.test(line)) {
        const inner = [];
        while (index < lines.length && !blank(lines[index])
          && (QUOTE.test(lines[index]) || (inner.length && !interrupts(lines, index)))) {
          inner.push(lines[index].replace(/^ {0,3}> ?/, ''));
          index += 1;
        }
        blocks.push({ kind: 'quote', from, to: index, lines: inner });
      } else if (LIST_ITEM.test(line)) {
        const list = scanList(lines, index);
        blocks.push(list);
        index = list.to;
      } else if (startsTable(lines, index)) {
        const header = splitCells(line);
        const aligns = delimiterRow(lines[index + 1]);
        const rows = [];
        index += 2;
        while (index < lines.length && !blank(lines[index]) && lines[index].includes('|')) {
          rows.push(splitCells(lines[index]));
          index += 1;
        }
        blocks.push({ kind: 'table', from, to: index, header, aligns, rows });
      } else {
        const text = [line];
        index += 1;
        while (index < lines.length && !blank(lines[index]) && !interrupts(lines, index)) {
          text.push(lines[index]);
          index += 1;
        }
        blocks.push({ kind: 'paragraph', from, to: index, text: text.map((part) => part.trim()).join('\n') });
      }
    }
    return blocks;
  }

  // A list from `start`: its items' lines, de-indented for a nested render.
  function scanList(lines, start) {
    const first = LIST_ITEM.exec(lines[start]);
    const ordered = /\d/.test(first[2]);
    const base = first[1].length;
    const items = [];
    let loose = false;
    let index = start;
    while (index < lines.length) {
      const item = LIST_ITEM.exec(lines[index]);
      if (!item || item[1].length !== base || /\d/.test(item[2]) !== ordered) break;
      const content = item[0].length === lines[index].length ? item[0].length + 1 : item[0].length;
      const itemLines = [lines[index].slice(item[0].length)];
      index += 1;
      while (index < lines.length) {
        const line = lines[index];
        if (blank(line)) {
          let next = index;
          while (next < lines.length && blank(lines[next])) next += 1;
          if (next < lines.length && indentOf(lines[next]) >= content) {
            for (; index < next; index += 1) itemLines.push('');
            loose = true;
            continue;
          }
          const sibling = next < lines.length ? LIST_ITEM.exec(lines[next]) : null;
          if (sibling && sibling[1].length === base && /\d/.test(sibling[2]) === ordered) {
            loose = true;
            index = next;
          }
          break;
        }
        const indent = indentOf(line);
        if (indent >= content) { itemLines.push(line.slice(content)); index += 1; continue; }
        // Nested lists are often indented less than the item's text: still the item's.
        if (indent > base && LIST_ITEM.test(line)) { itemLines.push(line.slice(indent)); index += 1; continue; }
        if (interrupts(lines, index)) break;
        itemLines.push(line.trim());
        index += 1;
      }
      items.push(itemLines);
    }
    return { kind: 'list', from: start, to: index, ordered, start: parseInt(first[2], 10), items, loose };
  }

  function build(block, depth, tight) {
    switch (block.kind) {
      case 'code':
        return codeBlock(block.body, block.info);
      case 'heading':
        return element('h' + block.level, {}, new Inline(block.text).render(depth));
      case 'rule':
        return element('hr');
      case 'quote':
        return element('blockquote', {}, renderLines(block.lines, depth + 1, false));
      case 'list': {
        const list = element(block.ordered ? 'ol' : 'ul',
          { start: block.ordered && block.start !== 1 ? block.start : undefined });
        for (const item of block.items) list.append(element('li', {}, renderLines(item, depth + 1, !block.loose)));
        return list;
      }
      case 'table': {
        const cell = (tag, text, column) => element(tag, { class: block.aligns[column] ? 'align-' + block.aligns[column] : undefined },
          new Inline(text || '').render(depth));
        const head = element('tr', {}, ...block.header.map((text, column) => cell('th', text, column)));
        const body = element('tbody', {}, ...block.rows.map((row) =>
          element('tr', {}, ...block.header.map((_, column) => cell('td', row[column], column)))));
        return element('div', { class: 'md-table' }, element('table', {}, element('thead', {}, head), body));
      }
      case 'paragraph': {
        const inline = new Inline(block.text).render(depth);
        return tight ? inline : element('p', {}, inline);
      }
      default:
        return document.createTextNode('');
    }
  }

  function splitLines(text) {
    return String(text).replace(/\r\n?/g, '\n').split('\n').map((line) => line.replace(/^\t+/, (tabs) => '    '.repeat(tabs.length)));
  }

  function renderLines(lines, depth, tight) {
    const fragment = document.createDocumentFragment();
    if (depth > MAX_DEPTH) {
      fragment.append(lines.join('\n'));
      return fragment;
    }
    for (const block of scan(lines)) fragment.append(build(block, depth, tight));
    return fragment;
  }

  // Markdown text as a fragment of DOM nodes.
  function render(text) {
    return renderLines(splitLines(text), 0, false);
  }

  // What `renderInto` rendered last per container: each top-level block's source and node.
  const rendered = new WeakMap();

  // Renders `text` into `container`, rebuilding only the top-level blocks whose source
  // changed since the last call: a streamed reply re-renders its last block, not all of it.
  function renderInto(container, text) {
    const lines = splitLines(text);
    const previous = rendered.get(container) || [];
    const next = [];
    let reused = 0;
    for (const block of scan(lines)) {
      const source = block.kind + '\u0000' + lines.slice(block.from, block.to).join('\n');
      const old = previous[next.length];
      if (old && reused === next.length && old.source === source) {
        next.push(old);
        reused += 1;
      } else {
        next.push({ source, node: build(block, 0, false) });
      }
    }
    for (const stale of previous.slice(reused)) stale.node.remove();
    for (const fresh of next.slice(reused)) container.append(fresh.node);
    rendered.set(container, next);
  }

  window.squidMarkdown = Object.freeze({ render, renderInto, highlight, safeHref });
})();
