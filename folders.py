import sys
sys.path.insert(0, "tests/contract"); sys.path.insert(0, ".")
import test_layering as L
g = L.graph()
def folder(m, pkg):
    parts = m.split(".")
    base = pkg.split(".")
    if parts[:len(base)] != base: return None
    rest = parts[len(base):]
    mod = L.modules()[m]
    if len(rest) == 0: return pkg
    if len(rest) == 1 and mod.name != "__init__.py": return pkg  # top-level module of the package
    return pkg + "." + rest[0]
for pkg in ("dsh_team", "host_spec.host", "host_spec"):
    fg = {}
    for m, ts in g.items():
        f = folder(m, pkg)
        if f is None: continue
        for t in ts:
            ft = folder(t, pkg)
            if ft is None or ft == f: continue
            fg.setdefault(f, {}).setdefault(ft, []).append((m, t))
    # find cycles via SCC
    import itertools
    nodes = set(fg) | {t for v in fg.values() for t in v}
    idx = {}; low = {}; st=[]; on=set(); sccs=[]; c=[0]
    sys.setrecursionlimit(10000)
    def sc(v):
        idx[v]=low[v]=c[0]; c[0]+=1; st.append(v); on.add(v)
        for w in fg.get(v, {}):
            if w not in idx: sc(w); low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],idx[w])
        if low[v]==idx[v]:
            comp=[]
            while True:
                w=st.pop(); on.discard(w); comp.append(w)
                if w==v: break
            if len(comp)>1: sccs.append(comp)
    for v in sorted(nodes):
        if v not in idx: sc(v)
    print("==", pkg, "folders", len(nodes), "cyclic groups:", len(sccs))
    for comp in sccs:
        print("  ", sorted(comp))
        for a in comp:
            for b in comp:
                if b in fg.get(a, {}):
                    print("     ", a, "->", b, len(fg[a][b]), fg[a][b][:3])
