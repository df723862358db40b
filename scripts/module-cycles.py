#!/usr/bin/env python3
"""Module cycles of a crate's src (runner/src by default; crates/engine/src, …): every
`use crate::`/`super::` and inline `crate::x::` path per top-level module (tests left out); prints
the strongly connected components, and with -v each edge with file:line. Run before and after each
step of the crate split (docs/architecture.md)."""
import os,re,sys,json
ROOT=sys.argv[1] if len(sys.argv)>1 and not sys.argv[1].startswith('-') else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'runner', 'src')
tops=set()
for f in os.listdir(ROOT):
    if f.endswith('.rs') and f not in ('main.rs','lib.rs'): tops.add(f[:-3])
    elif os.path.isdir(os.path.join(ROOT,f)): tops.add(f)
def top_of(rel):
    p=rel.split('/')
    return p[0][:-3] if len(p)==1 else p[0]
def modpath(rel):
    # module path components of the file
    p=rel[:-3].split('/')
    if p[-1]=='mod': p=p[:-1]
    if p in (['main'],['lib']): p=[]
    return p
def strip_comment(line):
    # remove // comments not in strings (approx)
    out=[];i=0;ins=False
    while i<len(line):
        c=line[i]
        if c=='"' and (i==0 or line[i-1]!='\\'): ins=not ins
        if not ins and line.startswith('//',i): break
        out.append(c);i+=1
    return ''.join(out)
def expand_use(s):
    # s: path tree like crate::{a::b, c::{d,e}} -> list of paths
    s=s.strip()
    def split_top(x):
        parts=[];depth=0;cur=''
        for ch in x:
            if ch=='{':depth+=1
            if ch=='}':depth-=1
            if ch==',' and depth==0: parts.append(cur);cur=''
            else: cur+=ch
        if cur.strip(): parts.append(cur)
        return [p.strip() for p in parts if p.strip()]
    def rec(prefix,x):
        x=x.strip()
        i=x.find('{')
        if i<0: return [prefix+x]
        pre=x[:i]; inner=x[i+1:x.rindex('}')]
        res=[]
        for part in split_top(inner): res+=rec(prefix+pre,part)
        return res
    return rec('',s)
edges=[]  # (src_top, dst_top, file, line, testonly, text)
for dp,dn,fn in os.walk(ROOT):
    for f in fn:
        if not f.endswith('.rs'): continue
        full=os.path.join(dp,f); rel=os.path.relpath(full,ROOT)
        src = top_of(rel) if rel not in ('main.rs','lib.rs') else 'main'
        mp=modpath(rel)
        lines=open(full).read().split('\n')
        # test region detection
        test=[False]*len(lines)
        i=0
        while i<len(lines):
            if re.match(r'\s*#\[cfg\(test\)\]',lines[i]):
                # next non-attr line
                j=i+1
                while j<len(lines) and lines[j].strip().startswith('#['): j+=1
                if j<len(lines) and re.match(r'\s*(pub(\(\w+\))?\s+)?mod\s+\w+\s*\{',lines[j]):
                    depth=0;k=j
                    while k<len(lines):
                        l=strip_comment(lines[k]); depth+=l.count('{')-l.count('}'); test[k]=True
                        if depth<=0 and k>j: break
                        k+=1
                    for q in range(i,min(k+1,len(lines))): test[q]=True
                    i=k
                else:
                    # single item: mark lines i..j and until item end (approx: statement ending ; or braces)
                    depth=0;k=j
                    while k<len(lines):
                        l=strip_comment(lines[k]); depth+=l.count('{')-l.count('}'); test[k]=True
                        if depth<=0 and (';' in l or '}' in l): break
                        k+=1
                    for q in range(i,min(k+1,len(lines))): test[q]=True
                    i=k
            i+=1
        # collect use statements (multi-line)
        txt=[strip_comment(l) for l in lines]
        i=0
        while i<len(txt):
            l=txt[i]
            m=re.match(r'\s*(pub(\([^)]*\))?\s+)?use\s+(.*)',l)
            if m:
                stmt=m.group(3); j=i
                while ';' not in stmt and j+1<len(txt):
                    j+=1; stmt+=' '+txt[j]
                stmt=stmt.split(';')[0]
                for p in expand_use(stmt):
                    p=p.split(' as ')[0].strip()
                    comps=[c for c in p.split('::') if c]
                    if not comps: continue
                    if comps[0]=='crate': abs_=comps[1:]
                    elif comps[0] in ('super','self'):
                        # for non-mod files, self = mp, super = mp[:-1]
                        cur=list(mp)
                        k=0
                        while k<len(comps) and comps[k] in('super','self'):
                            if comps[k]=='super': cur=cur[:-1]
                            k+=1
                        abs_=cur+comps[k:]
                    else: abs_=None
                    if abs_ and abs_[0] in tops:
                        dst=abs_[0]
                        if dst!=src: edges.append((src,dst,rel,i+1,test[i],'::'.join(abs_)))
                i=j+1; continue
            # inline crate:: paths
            for mm in re.finditer(r'(?<![\w:])crate::(\w+)((?:::\w+)*)',l):
                dst=mm.group(1)
                if dst in tops and dst!=src: edges.append((src,dst,rel,i+1,test[i],dst+mm.group(2)))
            for mm in re.finditer(r'(?<![\w:])((?:super::)+)(\w+)((?:::\w+)*)',l):
                n=mm.group(1).count('super'); cur=list(mp)[:len(mp)-n]
                abs_=cur+[mm.group(2)]
                if abs_[0] in tops and abs_[0]!=src and not re.match(r'\s*(pub\s+)?use',l):
                    edges.append((src,abs_[0],rel,i+1,test[i],'::'.join(abs_)+mm.group(3)))
            i+=1
EDGES=edges

# --- graph of production edges (cfg(test) code and test-only files left out), SCCs
import collections
TESTFILES={'spec/fuzz.rs'}
G=collections.defaultdict(set); why=collections.defaultdict(list)
for s,d,f,l,t,x in EDGES:
    if t or f in TESTFILES: continue
    G[s].add(d); why[(s,d)].append(f"{f}:{l} {x}")
sys.setrecursionlimit(10000)
idx={};low={};st=[];on=set();sccs=[];c=[0]
def sc(v):
    idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
    for w in G[v]:
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        comp=[]
        while True:
            w=st.pop();on.discard(w);comp.append(w)
            if w==v: break
        sccs.append(comp)
for v in sorted(set(G)|{d for vs in G.values() for d in vs}):
    if v not in idx: sc(v)
for comp in sccs:
    if len(comp)>1:
        print(len(comp), sorted(comp))
        if '-v' in sys.argv:
            for a in sorted(comp):
                for b in sorted(G[a]):
                    if b in comp: print('   ',a,'->',b,'|','; '.join(sorted(set(why[(a,b)]))))
