"""The labelling page itself: its keys (:func:`class_keys`), the strategies' names as it shows them
(:func:`strategy_labels`) and its HTML, CSS and JavaScript (``PAGE``).

:func:`~skdbal.labelling.app.make_app` serves ``PAGE`` with its placeholders (``__TOKEN__``,
``__CLASSES__``, ``__KEYS__``, ``__IMAGES__``, ``__ANNOTATOR__``, ``__STRATEGY_NAMES__``) replaced by JSON. The page
is keyboard-first: every class has a key (or is clicked), and the keys work whatever was clicked last.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

#: The page's own keys, which no class may take (the arrows are named keys, never one character).
COMMAND_KEYS = {"s": "skip", "u": "undo", "ArrowLeft": "move left", "ArrowRight": "move right"}


def strategy_labels() -> Dict[str, str]:
    """The strategies' names as the page shows them beside a score, by registered name: each strategy's
    ``display_name`` (:data:`skdbal.acquisition.STRATEGIES`; a strategy registered later is among them).

    Examples
    --------
    >>> from skdbal.labelling._page import strategy_labels
    >>> labels = strategy_labels()
    >>> labels["bald"], labels["max_entropy"], labels["random"]
    ('BALD', 'max entropy', 'random')
    """
    from ..acquisition import STRATEGIES, display_name

    return {name: display_name(strategy) for name, strategy in STRATEGIES.items()}


def class_keys(classes: Sequence, keys: Optional[Sequence[str]] = None) -> List[Optional[str]]:
    """The key that labels each class on the page, or None for a class labelled by a click only.

    Classes named by single digits (``0``-``9``, all of them) take their own digit, whatever their
    order: pressing 4 labels class ``"4"``. Other classes take 1-9, then 0, in order (ten at most).
    ``keys`` gives one key per class instead: single printable characters, distinct, none a space
    and none of the page's own keys (``s`` skip, ``u`` undo).

    Parameters
    ----------
    classes : sequence
        The session's classes (their text is what the page shows).
    keys : sequence of str or str, optional
        One key per class (a string is split at commas, as ``skdbal label --keys`` gives it).

    Returns
    -------
    list of str or None

    Raises
    ------
    ValueError
        Naming the problem: the wrong number of keys, a key that is not one printable character, a
        key given twice, or one of the page's own keys.

    Examples
    --------
    >>> from skdbal.labelling._page import class_keys
    >>> class_keys(range(10))                  # digits: each its own key
    ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']
    >>> class_keys(["7", "3"])
    ['7', '3']
    >>> class_keys(["cat", "dog", "bird"])     # others: 1-9, then 0
    ['1', '2', '3']
    >>> class_keys([f"c{i}" for i in range(12)])[8:]
    ['9', '0', None, None]
    >>> class_keys(["cat", "dog"], "c,d")
    ['c', 'd']
    >>> class_keys(["cat", "dog"], "c,c")
    Traceback (most recent call last):
        ...
    ValueError: the keys must be distinct: 'c' is given for 'cat' and 'dog'
    >>> class_keys(["cat", "dog"], "s,d")
    Traceback (most recent call last):
        ...
    ValueError: 's' is the page's own key to skip: give 'cat' another key
    """
    names = [str(c) for c in classes]
    if keys is None:
        if names and all(len(n) == 1 and n in "0123456789" for n in names) and len(set(names)) == len(names):
            return names
        return [str((i + 1) % 10) if i < 10 else None for i in range(len(names))]
    if isinstance(keys, str):
        keys = keys.split(",")
    keys = list(keys)
    if len(keys) != len(names):
        raise ValueError(f"{len(keys)} keys for {len(names)} classes: give one key per class, in the classes' order")
    for key, name in zip(keys, names):
        if not (isinstance(key, str) and len(key) == 1 and key.isprintable() and not key.isspace()):
            raise ValueError(f"the key of {name!r} must be one printable character other than a space; got {key!r}")
        if key in COMMAND_KEYS:
            raise ValueError(f"{key!r} is the page's own key to {COMMAND_KEYS[key]}: give {name!r} another key")
    first = {}
    for key, name in zip(keys, names):
        if key in first:
            raise ValueError(f"the keys must be distinct: {key!r} is given for {first[key]!r} and {name!r}")
        first[key] = name
    return keys


PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>skdbal: label</title>
<style>
 html{scrollbar-gutter:stable}   /* the panel growing past the window must not shift the page by a scrollbar */
 body{font-family:system-ui,sans-serif;margin:0;background:#fafafa;color:#222}
 header{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid #ddd;padding:.5em 1.5em;
  display:grid;grid-template-columns:auto minmax(0,1fr) auto;column-gap:2em;align-items:center}
 header h1{font-size:1.25em;margin:0;white-space:nowrap}
 #controls{grid-column:3;display:flex;gap:1.4em;align-items:center;white-space:nowrap;font-size:.9em}
 #statusline{grid-column:1/-1;display:flex;gap:1.5em;align-items:center;height:1.9em;margin-top:.3em;
  font-size:.9em;color:#555;white-space:nowrap}
 #state{flex:0 0 7em;padding:.1em .7em;border-radius:1em;background:#e8f1e8;color:#2a6a2a;font-weight:600;
  text-align:center}
 #progress{flex:1 1 0;min-width:0;font-variant-numeric:tabular-nums;overflow:hidden;text-overflow:ellipsis;
  color:#333}
 #looks{grid-column:1/-1;height:1.6em;line-height:1.6em;font-size:.9em;color:#555;white-space:nowrap;
  overflow:hidden;text-overflow:ellipsis}
 #looks b{font-weight:600;color:#8a5a00}
 #state.training{background:#fff3d6;color:#8a5a00;animation:pulse 1.2s ease-in-out infinite}
 #state.waiting{background:#eceff3;color:#555}
 @keyframes pulse{50%{opacity:.55}}
 #error{grid-column:1/-1;margin:.3em 0;padding:.5em .8em;background:#fde8e8;border:1px solid #d62728;color:#8b1a1a;
  border-radius:4px;font-weight:600;display:flex;justify-content:space-between;gap:1em}
 #error[hidden]{display:none} #error button{background:none;border:0;font-size:1.1em;cursor:pointer;color:#8b1a1a}
 main{padding:.8em 1.5em}
 #classes button{font-size:1.05em;margin:.2em .25em .2em 0;padding:.35em .8em;cursor:pointer}
 #classes button kbd{margin-left:.4em}
 kbd{background:#eee;border:1px solid #bbb;border-radius:3px;padding:0 .3em;font-family:ui-monospace,monospace;
  font-size:.9em}
 #batch{display:flex;flex-wrap:wrap;gap:.6em;margin:.6em 0;min-height:14em;align-items:flex-start}
 .item{width:10em;padding:.4em;border:2px solid #ccc;border-radius:6px;background:#fff;text-align:center;
  cursor:pointer}
 .item.current{border-color:#1f77b4;box-shadow:0 0 0 2px #1f77b444}
 .item.rowitem{width:auto;min-width:10em;max-width:20em;text-align:left;font-variant-numeric:tabular-nums}
 .item.done{opacity:.35} .item.saving{opacity:.6} .item.look{border-style:dashed;border-color:#d62728}
 .pic{height:128px;display:flex;align-items:center;justify-content:center}
 .item img{image-rendering:pixelated;visibility:hidden}
 .item img.fit{visibility:visible}
 .badge{font-size:.75em;color:#d62728;font-weight:bold} .outcome{font-weight:600;color:#222}
 .meta{font-size:.8em;color:#666;font-variant-numeric:tabular-nums} a{color:#1f77b4}
 #empty{font-size:1.1em;color:#555;padding:1.2em 1em;text-align:center;width:100%}
 #notice{min-height:1.3em;margin:.2em 0;color:#555}
 #panel{display:flex;flex-wrap:wrap;gap:1em 2.5em;margin-top:.8em;padding:.6em .4em .4em;border-top:1px solid #ddd}
 #panel h2{font-size:1em;margin:.2em 0 .4em} #panel p{margin:.25em 0;max-width:42em}
 #panel .col{flex:1 1 30em;min-width:0} #rules{margin:.3em 0;padding-left:1.2em;max-width:42em}
 #rules li{margin:.2em 0} #rules li.says{color:#2a6a2a} #advice{font-weight:600}
 #curve{margin-top:.5em} #curve svg{background:#fff;border:1px solid #ddd}
</style></head><body>
<header>
 <h1>skdbal: label</h1>
 <span id="controls"><label><input type="checkbox" id="showguess" checked> show the model's guess</label>
 <label>annotator <input id="annotator" value="" size="14" maxlength="64"></label>
 <span class="meta"><a id="csv" href="#" download="labels.csv">labels.csv</a> ·
 <a id="report" href="#" download="report.json">report.json</a> ·
 <a id="model" href="#" download>model (save_params)</a></span></span>
 <div id="statusline"><span id="state">starting</span><span id="progress">starting…</span></div>
 <div id="looks"></div>
 <div id="error" role="alert" hidden><span id="error-text"></span>
  <button id="error-close" title="dismiss">×</button></div>
</header>
<main>
<div id="classes"></div>
<p class="meta" id="hint"></p>
<div id="notice"></div>
<div id="batch"></div>
<section id="panel">
 <div class="col" id="howgood"><h2>How good is the model?</h2>
  <p id="estimate">No estimate yet.</p><p id="test" class="meta"></p><p id="forecast" class="meta"></p>
  <div id="curve"></div></div>
 <div class="col" id="canstop"><h2>Can I stop?</h2>
  <p id="advice"></p><ul id="rules"></ul>
  <p class="meta">The rules advise; labelling goes on until you stop.</p></div>
</section>
</main>
<script>
const TOKEN = __TOKEN__, CLASSES = __CLASSES__, KEYS = __KEYS__, IMAGES = __IMAGES__;
const ANNOTATOR = __ANNOTATOR__;   // the name the token belongs to (one token per annotator), else null
const $ = id => document.getElementById(id);
const TQ = 'token=' + encodeURIComponent(TOKEN);   // every request carries the token (needed off loopback)
const PARAMS = new URLSearchParams(location.search);
// items asked for at a time (?n=, default 5): several people share a batch
const PER_LOAD = Math.min(Math.max(parseInt(PARAMS.get('n') || '5', 10) || 5, 1), 100);
const PREFETCH = 2;        // ask for more while at most this many items are left to label
const BOX = 128;           // images are drawn at an integer multiple of their size, up to this many pixels
const STRATEGY_NAMES = __STRATEGY_NAMES__;   // registered name -> the name people read (strategy_labels)
let page = [], queue = [], current = 0, history = [], status = {}, shownVersion = null, fetching = false;
let errorFrom = null;
const sizes = new Map();   // item id -> [width, height] drawn
// the name: ?annotator=NAME, else this browser's own (a new one per browser, kept), so that two people
// are never one annotator by default (second looks go to someone other than a label's author)
const nameBox = $('annotator');
let NAME = ANNOTATOR || PARAMS.get('annotator');
try { NAME = NAME || localStorage.getItem('skdbal-annotator'); } catch(e) {}
NAME = (NAME || 'annotator-' + Math.random().toString(36).slice(2, 6)).slice(0, 64);
nameBox.value = NAME;
const remember = () => { try { localStorage.setItem('skdbal-annotator', nameBox.value); } catch(e) {} };
nameBox.addEventListener('keydown', e => { if(e.key === 'Enter' || e.key === 'Escape') nameBox.blur(); });
if(ANNOTATOR === null){ remember(); nameBox.onchange = remember; }
else { const who = document.createElement('b'); who.id = 'annotator-name'; who.textContent = ANNOTATOR;
       nameBox.replaceWith(who); }   // the server takes the name from the token: nothing to edit
$('csv').href = '/api/labels.csv?' + TQ;
$('report').href = '/api/report.json?' + TQ;
$('model').href = '/api/model.pt?' + TQ;
function annotator(){ return ANNOTATOR !== null ? ANNOTATOR : nameBox.value || NAME; }
const sleep = ms => new Promise(ok => setTimeout(ok, ms));
const rid = () => crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2) + Date.now();
function esc(s){   // text for innerHTML: keys are file names, which may hold <, &, quotes
  return String(s).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'})[c]);
}

// ---- errors: a banner, never an alert; cleared when what failed works again
function showError(text, from){ errorFrom = from; $('error-text').textContent = text; $('error').hidden = false; }
function clearError(from){ if(errorFrom === from){ errorFrom = null; $('error').hidden = true; } }
$('error-close').onclick = e => { errorFrom = null; $('error').hidden = true; e.currentTarget.blur(); };
async function answer(r, from, what = ''){   // the JSON of a good answer; else null, and the error in the banner
  let j = null;
  try { j = await r.json(); } catch(e) {}
  if(!r.ok){
    showError(what + ((j && j.error) || `the server answered ${r.status} ${r.statusText}`), from); return null;
  }
  clearError(from); return j;
}
async function get(path, from){
  try { return await answer(await fetch(path, {headers: {'X-Token': TOKEN}}), from); }
  catch(e){ showError(`the server could not be reached (${e.message})`, from); return null; }
}
async function post(path, data){   // true once the server has committed it; else the banner says why
  try {
    const r = await fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Token': TOKEN},
                                 body: JSON.stringify(data)});
    const j = await answer(r, 'post', 'not saved: ');
    if(j) refreshStatus();
    return j !== null;
  } catch(e){ showError(`not saved: the server could not be reached (${e.message})`, 'post'); return false; }
}

// ---- status: progress, the training state, what the session waits for
let statusTimer = null;
async function refreshStatus(){ const s = await get('/api/status', 'status'); if(s) showStatus(s); }
const open = it => !it.done && !it.busy;   // still to label: neither done nor being sent
function left(){ return page.filter(open).length + queue.length; }
function showStatus(s){
  status = s;
  $('progress').textContent = `${s.labelled} labelled · ${s.pending} left in the batch · ` +
    (s.model_version < 0 ? 'no model yet' : `model version ${s.model_version}`) +
    (s.last_retrain ? ` · last retrain ${new Date(s.last_retrain * 1000).toLocaleTimeString([], {hour12: false})}`
                    : '');
  if(s.error) showError('the learning loop stopped: ' + s.error, 'loop'); else clearError('loop');
  showState();
  showPanel(s);
  if(s.model_version !== shownVersion){ shownVersion = s.model_version; drawCurve(); }
  clearTimeout(statusTimer);   // while it trains or nothing is left, the state is asked for every second
  statusTimer = setTimeout(refreshStatus, s.training || !left() ? 1000 : 5000);
}
function showLooks(){   // the second looks: those this page holds, and those waiting for someone else
  const l = status.second_looks || {}, box = $('looks');
  box.title = "labels the model found unlikely, each offered to an annotator other than the label's";
  if(!l.flagged){ box.textContent = 'second looks: no label flagged'; return; }
  const here = page.filter(it => it.second_look && !it.done).length + queue.filter(it => it.second_look).length;
  const elsewhere = Math.max((l.pending || 0) - here, 0);
  const alone = elsewhere && !(status.annotators || []).some(n => n !== annotator());
  const parts = [`${l.flagged} flagged`];
  if(here) parts.push(`${here} on this page`);
  if(elsewhere) parts.push(`${elsewhere} waiting for another annotator` +
                           (alone ? ' (<b>nobody else is labelling now</b>)' : ''));
  parts.push(`${l.confirmed} confirmed`, `${l.changed} changed`);
  if(l.withdrawn) parts.push(`${l.withdrawn} withdrawn`);
  box.innerHTML = 'second looks: ' + parts.join(' · ');   // numbers and fixed words only
  if(alone) box.title += ': they wait until someone else opens the page (another browser, or ?annotator=NAME)';
}
function showState(){
  showLooks();
  const box = $('state'), idle = !left();
  box.className = status.training ? 'training' : (idle ? 'waiting' : '');
  box.textContent = status.training ? 'training…' : (idle ? 'waiting' : 'ready');
  const empty = $('empty');
  if(empty) empty.textContent = waitingText();
  $('notice').textContent = idle ? '' : noticeText();   // the line keeps its height: nothing moves
}
function noticeText(){   // what the items on the page are, while the session waits or trains
  const first = status.model_version === undefined || status.model_version < 0;
  if(status.waiting_for) return `${first ? 'The first model' : 'The model'} waits for ${status.waiting_for}: ` +
                                'these items are chosen to cover the pool.';
  if(status.training) return 'The model is training. Meanwhile: ' +
    (first ? 'items chosen to cover the pool.' : 'the next best items under the last model.');
  return '';
}
function waitingText(){
  if(status.waiting_for) return `Nothing to label yet: waiting for ${status.waiting_for}.`;
  if(status.training) return 'Nothing to label right now: the model is training; ' +
                             'the next items come as soon as they are chosen.';
  return 'Nothing to label right now: the next items come as soon as there are some.';
}

// ---- the items: long polls for more before the page runs out (never a sleep between them)
async function fetchMore(){
  if(fetching) return;
  fetching = true;
  try {
    while(left() <= PREFETCH){
      const have = page.filter(it => !it.done).concat(queue).map(it => it.item);
      const j = await get(`/api/batch?wait=10&n=${PER_LOAD}&have=${have.join(',')}&annotator=` +
                          encodeURIComponent(annotator()), 'batch');
      if(!j){ await sleep(2000); continue; }   // the banner says why; ask again, without hammering
      const known = new Set(page.concat(queue).map(it => it.item));
      for(const it of j.items) if(!known.has(it.item)) queue.push(it);
      showStatus(j.status);
      advance();
    }
  } finally { fetching = false; }
}
function advance(){   // a page whose items are all done (and saved) gives way to the next ones, if any
  if(!page.some(it => !it.done) && queue.length){
    page = queue.splice(0, PER_LOAD); current = 0; render();
  } else if(!page.length){ render(); }
  showState();
}
function next(){
  const after = page.findIndex((it, i) => i > current && open(it)), first = page.findIndex(open);
  if(after >= 0) current = after; else if(first >= 0) current = first;
  refresh();
}
function refresh(){ render(); advance(); fetchMore(); }
function move(d){ current = Math.min(Math.max(current + d, 0), page.length - 1); render(); }
async function send(it, path, data, outcome){   // the next item at once; this one is done once saved
  it.busy = outcome + '…'; next();
  const ok = await post(path, data);
  it.busy = null;
  if(ok){ it.done = outcome; refresh(); return true; }
  if(page.includes(it)) current = page.indexOf(it);   // not saved: back to it, the banner says why
  render(); return false;
}
async function label(c){
  const it = page[current]; if(!it || !open(it)) return;
  const data = {item: it.item, label: CLASSES[c], annotator: annotator(), request_id: rid()};
  if(await send(it, '/api/submit', data, 'labelled ' + CLASSES[c])) history.push(it);
}
async function skip(){
  const it = page[current]; if(!it || !open(it)) return;
  await send(it, '/api/skip', {item: it.item, annotator: annotator()}, 'skipped');
}
async function undo(){
  const it = history[history.length - 1]; if(!it || it.busy) return;
  it.busy = true;
  const ok = await post('/api/undo', {item: it.item, annotator: annotator(), request_id: rid()});
  it.busy = false;
  if(ok){
    history.pop(); it.done = null;
    if(!page.includes(it)) page.unshift(it);
    current = page.indexOf(it); render(); showState();
  }
}

// ---- drawing
function strategyName(){
  const s = status.strategy; if(!s) return '';
  return (STRATEGY_NAMES[s] || String(s).replace(/_/g, ' ')) + ' ';
}
function fit(img){   // an integer multiple of the image's size (never blurred), or its own size
  const w = img.naturalWidth, h = img.naturalHeight; if(!w || !h) return;
  const k = Math.max(1, Math.floor(BOX / Math.max(w, h)));
  sizes.set(Number(img.dataset.item), [w * k, h * k]);
  img.width = w * k; img.height = h * k; img.classList.add('fit');
}
const rows = new Map();   // item id -> its row (tables), fetched once
function rowHtml(id){
  const r = rows.get(id);
  if(r === undefined){
    rows.set(id, null);
    get('/api/item/' + Number(id), 'row').then(j => { if(j){ rows.set(id, j); render(); } });
  }
  if(!r) return '<div class="meta">…</div>';
  const n = 12, pairs = r.values.slice(0, n).map((v, j) =>
    `<span style="color:#666">${esc(r.columns ? r.columns[j] : 'x' + j)}:</span> ${esc(v)}`);
  const more = r.values.length > n ? `<br>… ${r.values.length - n} more` : '';
  return `<div class="row" style="text-align:left">${pairs.join('<br>')}${more}</div>`;
}
function render(){
  const box = $('batch'); box.innerHTML = '';
  const show = $('showguess').checked;
  page.forEach((it, i) => {
    const d = document.createElement('div');
    d.className = 'item' + (IMAGES ? '' : ' rowitem') + (i === current ? ' current' : '') +
                  (it.done ? ' done' : it.busy ? ' saving' : '') +
                  (it.second_look ? ' look' : '');
    d.id = 'item-' + it.item;
    const id = Number(it.item), size = sizes.get(id);
    const dims = size ? ` width="${size[0]}" height="${size[1]}" class="fit"` : '';
    const pic = IMAGES ? `<div class="pic"><img alt="item ${id}" data-item="${id}"${dims} ` +
                         `src="/api/item/${id}.png?${TQ}"></div>` : rowHtml(id);
    const look = it.second_look ? '<div class="badge">second look</div>' : '';
    const score = it.score === null || it.score === undefined ? '' :
                  `${esc(strategyName())}score ${Number(it.score).toFixed(3)}`;
    // a second look shows no guess (nor the first label): nothing to anchor on
    const guess = show && !it.second_look && it.guess !== null && it.guess !== undefined ?
                  `guess ${esc(it.guess)}` : '';
    d.innerHTML = `${look}${pic}<div class="meta">${esc(it.key)}<br>` +
                  `${[score, guess].filter(Boolean).join(' · ')}&nbsp;</div>` +
                  `<div class="meta outcome">${it.done ? esc(it.done) : it.busy ? esc(it.busy) : '&nbsp;'}</div>`;
    d.onclick = () => { current = i; render(); };
    box.appendChild(d);
  });
  if(!page.some(it => !it.done) && !queue.length){
    const e = document.createElement('div'); e.id = 'empty'; box.prepend(e);
  }
  box.querySelectorAll('img:not(.fit)').forEach(img => {
    if(img.complete && img.naturalWidth) fit(img); else img.onload = () => fit(img);
  });
  showState();
}
function niceStep(span, most){
  for(const s of [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000])
    if(span / s <= most) return s;
  return Math.ceil(span / most);
}
function showPanel(s){   // the estimate, the test accuracy, the forecast and the rules, in the server's words
  if(s.accuracy_words !== undefined) $('estimate').textContent = s.accuracy_words;
  $('test').textContent = s.test_words || '';
  $('forecast').textContent = s.forecast_words ? 'Forecast: ' + s.forecast_words : '';
  $('advice').textContent = s.advice || '';
  const list = $('rules'); list.innerHTML = '';
  for(const v of s.stopping || []){
    const li = document.createElement('li'); li.className = v.stop ? 'says' : '';
    li.textContent = v.line; li.title = v.reason;
    list.appendChild(li);
  }
}
async function drawCurve(){   // each version's estimate (its interval when unbiased) and test accuracy
  const j = await get('/api/versions', 'versions'); if(!j) return;
  const est = j.versions.filter(m => m.estimate).map(m => [m.n_labels, m.estimate, m.version]);
  const test = j.versions.filter(m => m.metrics && m.metrics.accuracy !== undefined)
                         .map(m => [m.n_labels, m.metrics.accuracy, m.version]);
  const box = $('curve');
  if(!est.length && !test.length){ box.textContent = ''; return; }
  const W = 520, H = 240, L = 56, R = 16, T = 14, B = 42;
  const most = Math.max(...est.map(p => p[0]), ...test.map(p => p[0]), 1);
  const step = niceStep(most, 8), xmax = step * Math.ceil((most + 1) / step);   // room for the last mark
  const X = n => L + (W - L - R) * n / xmax, Y = a => H - B - (H - T - B) * a;
  let axes = `<path d="M${L},${T} V${H - B} H${W - R}" stroke="#555" fill="none"/>`;
  for(let a = 0; a <= 1.0001; a += 0.2){
    axes += `<path d="M${L - 4},${Y(a).toFixed(1)} H${W - R}" stroke="${a ? '#eee' : '#555'}"/>` +
      `<text x="${L - 7}" y="${(Y(a) + 4).toFixed(1)}" font-size="11" text-anchor="end">${Math.round(100 * a)}%</text>`;
  }
  for(let n = 0; n <= xmax; n += step){
    axes += `<path d="M${X(n).toFixed(1)},${H - B} v4" stroke="#555"/>` +
      `<text x="${X(n).toFixed(1)}" y="${H - B + 16}" font-size="11" text-anchor="middle">${n}</text>`;
  }
  axes += `<text x="${(L + W - R) / 2}" y="${H - 6}" font-size="12" text-anchor="middle">labels</text>` +
    `<text transform="translate(14,${(T + H - B) / 2}) rotate(-90)" font-size="12" ` +
    `text-anchor="middle">accuracy</text>`;
  const pct = a => (100 * a).toFixed(1) + '%';
  const marks = est.map(([n, e, v]) => {   // an unbiased estimate: a dot and its interval; a biased one: a ring
    const x = X(n).toFixed(1), tip = `version ${v}, ${n} labels: ` + (e.biased ?
      `right on ${pct(e.accuracy)} of the ${e.n_labels} items it asked about (biased: no interval)` :
      `estimated ${pct(e.accuracy)} (${pct(e.low)}–${pct(e.high)})`);
    return (e.biased ? '' : `<path class="interval" d="M${x},${Y(e.low).toFixed(1)} V${Y(e.high).toFixed(1)}" ` +
                              `stroke="#1f77b4" stroke-opacity=".5" stroke-width="2"/>`) +
      `<circle class="estimate" cx="${x}" cy="${Y(e.accuracy).toFixed(1)}" r="3.5" stroke="#1f77b4" ` +
      `stroke-width="1.5" fill="${e.biased ? '#fff' : '#1f77b4'}"><title>${esc(tip)}</title></circle>`;
  });
  const tests = test.map(([n, a, v]) => `<rect class="test" x="${(X(n) - 3).toFixed(1)}" ` +
    `y="${(Y(a) - 3).toFixed(1)}" ` +
    `width="6" height="6" fill="#ff7f0e"><title>version ${v}, ${n} labels: test accuracy ${pct(a)}</title></rect>`);
  const biased = est.some(p => p[1].biased), legend = [];
  if(est.length) legend.push(biased ? 'blue rings: share right on the items it asked about (biased low, no interval)'
                                    : 'blue: estimated accuracy with its 95% interval');
  if(test.length) legend.push('orange: accuracy on the test set given');
  box.innerHTML = `<div class="meta">${esc(legend.join(' · '))}</div>` +
    `<svg id="curve-svg" width="${W}" height="${H}" role="img" aria-label="accuracy against labels">${axes}` +
    `${marks.join('')}${tests.join('')}</svg>`;
}

// ---- the class buttons and the keys: the keyboard is never lost to a button, a box or a link
const bar = $('classes');
function button(html, id, action){
  const b = document.createElement('button'); b.innerHTML = html; b.id = id; b.tabIndex = -1;
  b.addEventListener('mousedown', e => e.preventDefault());   // a click does not take the focus
  b.onclick = () => { b.blur(); action(); };
  bar.appendChild(b);
}
CLASSES.forEach((c, i) => button(esc(c) + (KEYS[i] === null ? '' : `<kbd>${esc(KEYS[i])}</kbd>`), 'class-' + i,
                                 () => label(i)));
button('skip<kbd>s</kbd>', 'skip', skip);
button('undo<kbd>u</kbd>', 'undo', undo);
{
  const keyed = KEYS.map((k, i) => [k, i]).filter(p => p[0] !== null);
  const own = keyed.length && keyed.every(([k, i]) => k === CLASSES[i]);
  const example = keyed.length ? `<kbd>${esc(keyed[0][0])}</kbd> labels “${esc(CLASSES[keyed[0][1]])}”` : '';
  const unkeyed = CLASSES.length - keyed.length;
  $('hint').innerHTML = 'Keys: ' + (own ? 'each digit labels the highlighted item with its own class' :
      `the key on a class's button labels the highlighted item (${example})`) +
    (unkeyed ? `; ${unkeyed} class${unkeyed > 1 ? 'es have' : ' has'} no key: ` +
               `click ${unkeyed > 1 ? 'them' : 'it'}` : '') +
    ', <kbd>s</kbd> skips, <kbd>u</kbd> undoes the last label, <kbd>←</kbd>/<kbd>→</kbd> move.';
}
$('showguess').addEventListener('change', e => { e.target.blur(); render(); });
$('showguess').addEventListener('mousedown', e => e.preventDefault());
for(const a of [$('csv'), $('report'), $('model')]){   // a download leaves the keys to the page
  a.addEventListener('mousedown', e => e.preventDefault());
  a.addEventListener('click', () => setTimeout(() => a.blur(), 0));
}
document.addEventListener('keydown', e => {
  if(e.target === nameBox || e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
  const c = KEYS.indexOf(e.key);
  if(c >= 0) label(c);
  else if(e.key === 's') skip(); else if(e.key === 'u') undo();
  else if(e.key === 'ArrowRight') move(1); else if(e.key === 'ArrowLeft') move(-1);
  else if(e.key !== ' ' && e.key !== 'Enter') return;   // Space and Enter never repeat a click
  e.preventDefault();
});
document.addEventListener('keyup', e => {
  if(e.target !== nameBox && (e.key === ' ' || e.key === 'Enter')) e.preventDefault();
});
render(); refreshStatus(); fetchMore();
</script></body></html>
"""
