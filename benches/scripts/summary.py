#!/usr/bin/env python3
# Summarises an ab.sh output directory: per workload and target, requests/s of each
# repetition and their median, the ratio to `canned` of the same repetition (and its median:
# the host's speed moves between repetitions, a ratio within one mostly does not), server CPU
# per request, peak RSS, the cores other processes used, the generator's cores; for the mixed
# workloads the route and registration p99 of each phase.
# usage: summary.py OUTDIR
import json, sys, glob, os, statistics as st, collections
d = sys.argv[1]
res = collections.defaultdict(dict)
for f in glob.glob(os.path.join(d, '*.json')):
    wl, t, rep = os.path.basename(f)[:-5].rsplit('.', 2)
    try:
        j = json.load(open(f))
    except Exception:
        continue
    main = [p for p in j['phases'] if p['name'] != 'setup']
    extra = ''
    if wl.startswith('mixed'):
        # route p99 per phase
        extra = ' '.join('%s:%s p99=%.0fus' % (p['name'], c['name'], c['latency_us']['p99'])
                         for p in main for c in p['classes'] if c['name'] == 'route' or 'reg' in c['name'])
    res[wl][(t, int(rep))] = dict(ops=j['ops_per_s'], cpu=j['server']['cpu_s'],
        n=sum(c['ops'] for p in main for c in p['classes']), rss=j['server']['rss_peak_kib'],
        other=j['machine']['other_cores'], gen=j['machine']['generator_cores'], err=j['errors'], extra=extra)
for wl in res:
    targets = sorted({t for t, _ in res[wl]})
    print('==', wl)
    for t in targets:
        reps = sorted(r for tt, r in res[wl] if tt == t)
        rows = [res[wl][(t, r)] for r in reps]
        ops = [x['ops'] for x in rows]
        ratios = [res[wl][(t, r)]['ops'] / res[wl][('canned', r)]['ops'] for r in reps if ('canned', r) in res[wl]]
        us = [x['cpu'] / x['n'] * 1e6 for x in rows if x['n']]
        print('  %-9s ops/s %s  median %.0f  ratio-to-canned %s (median %s)  server-cpu us/op %s  rss-peak %s KiB  other-cores %s  gen %s  err %s' % (
            t, [round(o) for o in ops], st.median(ops),
            [round(r, 2) for r in ratios], round(st.median(ratios), 2) if ratios else '-',
            [round(u, 2) for u in us], [x['rss'] for x in rows], [x['other'] for x in rows], [x['gen'] for x in rows], [x['err'] for x in rows]))
        for x in rows:
            if x['extra']:
                print('     ', x['extra'])
