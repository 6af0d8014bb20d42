'use strict';
// Filters and search, in the page alone: nothing is fetched.
(function () {
  const search = document.getElementById('search');
  const tag = document.getElementById('tag');
  const shown = document.getElementById('shown');
  const statuses = Array.from(document.querySelectorAll('input[name=status]'));
  const scenarios = Array.from(document.querySelectorAll('details.scenario'));

  function apply() {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    const want = new Set(statuses.filter(s => s.checked).map(s => s.value));
    const t = tag.value;
    let n = 0;
    for (const sc of scenarios) {
      const tags = sc.dataset.tags.split(' ');
      const text = sc.dataset.text;
      const ok = want.has(sc.dataset.status) && (!t || tags.includes(t)) && words.every(w => text.includes(w));
      sc.classList.toggle('hidden', !ok);
      if (ok) n++;
    }
    for (const f of document.querySelectorAll('article.feature')) {
      f.classList.toggle('hidden', f.querySelectorAll('details.scenario:not(.hidden)').length === 0 && f.querySelectorAll('details.scenario').length > 0);
    }
    shown.textContent = n + ' of ' + scenarios.length + ' scenarios shown';
  }
  search.addEventListener('input', apply);
  tag.addEventListener('change', apply);
  for (const s of statuses) s.addEventListener('change', apply);
  for (const a of document.querySelectorAll('a.tag')) {
    a.addEventListener('click', e => { e.preventDefault(); e.stopPropagation(); tag.value = a.dataset.tag; apply(); });
  }
  apply();
})();
