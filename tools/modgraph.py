#!/usr/bin/env python3
"""File-level import graph of Rust crates: edges from `crate::`, `super::` and `self::` paths
outside comments and `#[cfg(test)] mod tests`; prints every circle (strongly connected
component) and exits 1 if there is one. Usage: modgraph.py crates/*/src"""
import os, re, sys
from collections import defaultdict

def modules(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith('.rs'): continue
            p = os.path.join(root, f)
            rel = os.path.relpath(p, src)[:-3]
            parts = rel.split(os.sep)
            if parts[-1] in ('mod', 'lib', 'main'): parts = parts[:-1]
            mods[tuple(parts)] = p
    return mods

def resolve(path, mods):
    # longest prefix that is a module
    for i in range(len(path), -1, -1):
        if tuple(path[:i]) in mods: return tuple(path[:i])
    return None

def strip_tests(text):
    # drop #[cfg(test)] mod tests { ... } blocks roughly: cut at '#[cfg(test)]\nmod'
    i = text.find('#[cfg(test)]\nmod tests')
    return text if i < 0 else text[:i]

def edges(mods):
    E = defaultdict(set)
    for m, p in mods.items():
        text = strip_tests(open(p).read())
        text = re.sub(r'//[^\n]*', '', text)
        # expand use-groups crudely: find crate:: / super:: / self:: paths
        for match in re.finditer(r'\b(crate|super|self)((?:::\w+)*)(::\{([^;]*?)\})?', text):
            base, rest, _, group = match.groups()
            segs = [s for s in rest.split('::') if s]
            if base == 'crate': path = segs
            elif base == 'super':
                parent = list(m)[:-1]
                while segs and segs[0] == 'super':
                    segs = segs[1:]; parent = parent[:-1]
                path = parent + segs
            else:
                here = list(m)
                path = here + segs
            targets = []
            if group:
                for g in re.split(r',', group):
                    g = g.strip().split('::')[0].strip()
                    if g and g != 'self':
                        targets.append(path + [g])
            targets.append(path)
            for t in targets:
                r = resolve(t, mods)
                if r is not None and r != m and r != () and not (len(r) < len(m) and m[:len(r)] == r):
                    E[m].add(r)
    return E

def sccs(nodes, E):
    index = {}; low = {}; st = []; on = set(); out = []; c = [0]
    sys.setrecursionlimit(10000)
    def sc(v):
        index[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in E.get(v, ()):
            if w not in index: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in nodes:
        if v not in index: sc(v)
    return out

found = 0
for src in sys.argv[1:]:
    mods = modules(src)
    E = edges(mods)
    for comp in sccs(list(mods), E):
        found += 1
        print(src, 'CYCLE:', ' <-> '.join('/'.join(c) or 'lib' for c in sorted(comp)))
sys.exit(1 if found else 0)
