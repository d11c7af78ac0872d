# Medians per (pipeline, test, config) of runs.csv: req/s, p99 (and its ratio to Redis's), p99.9.
import csv,sys,statistics as st
from collections import defaultdict
rows=list(csv.DictReader(open(sys.argv[1])))
m=defaultdict(list)
for r in rows: m[(r['pipe'],r['test'],r['config'])].append(r)
cfgs=list(dict.fromkeys(r['config'] for r in rows))
for (pipe,test) in sorted(set((k[0],k[1]) for k in m)):
    red=m.get((pipe,test,'redis'))
    rp99=st.median(float(x['p99']) for x in red) if red else None
    line=f"P{pipe} {test:5}"
    for c in cfgs:
        xs=m.get((pipe,test,c))
        if not xs: continue
        rps=st.median(float(x['rps']) for x in xs); p99=st.median(float(x['p99']) for x in xs); p999=st.median(float(x['p999']) for x in xs)
        line+=f" | {c}: {rps/1000:.0f}k p99 {p99:.3f}" + (f" ({p99/rp99:.2f}x)" if rp99 and c!='redis' else "") + f" p999 {p999:.2f}"
    print(line)
