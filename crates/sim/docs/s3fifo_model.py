# A model of libCacheSim's S3FIFO.c (small FIFO, main FIFO with a 2-bit clock,
# ghost FIFO) on cloudPhysicsIO, with each difference from tiercache's S3-FIFO
# switchable, to find which one moves the miss counts. Evidence for
# crates/sim/README.md; run: python3 crates/sim/docs/s3fifo_model.py
import struct, sys, os
from collections import OrderedDict
data=open(os.path.join(os.path.dirname(__file__),'../../../../shared/traces/cloudPhysicsIO.oracleGeneral.bin'),'rb').read()
reqs=[(i,s) for (_,i,s,_) in struct.iter_unpack('<IQIq',data)]
class Fifo:
    def __init__(s,cap): s.cap=cap; s.d=OrderedDict(); s.used=0
def run(cap, ghost_bytes=True, libvictim=True, small_limit=True, pre_main=True, thr=2):
    small_cap=int(cap*0.1); main_cap=cap-small_cap; ghost_cap=int(cap*0.9)
    small=OrderedDict(); main=OrderedDict(); ghost=OrderedDict()
    su=[0];mu=[0];gu=[0]
    has_ev=[False]; misses=0
    def ghost_add(o,sz):
        if o in ghost: return
        if ghost_bytes:
            if sz>ghost_cap: return
            while gu[0]+sz>ghost_cap:
                k,v=ghost.popitem(last=False); gu[0]-=v
            ghost[o]=sz; gu[0]+=sz
        else:
            ghost[o]=sz
            while len(ghost)>max(16,len(small)+len(main)): ghost.popitem(last=False)
    def evict_small():
        while small:
            o,(sz,f)=next(iter(small.items()))
            del small[o]; su[0]-=sz
            if f>=thr:
                main[o]=[sz,0]; mu[0]+=sz
            else:
                ghost_add(o,sz); return
    def evict_main():
        while main:
            o,v=next(iter(main.items()))
            del main[o]
            if v[1]>=1:
                main[o]=[v[0],min(v[1],3)-1]
            else:
                mu[0]-=v[0]; return
    for o,sz in reqs:
        if o in small:
            small[o][1]+=1; continue
        hog = o in ghost
        if hog: gu[0]-=ghost.pop(o)
        if o in main:
            main[o][1]+=1; continue
        misses+=1
        if small_limit and sz>small_cap: continue
        if sz>cap: continue
        while su[0]+mu[0]+sz>cap:
            has_ev[0]=True
            if libvictim:
                if mu[0]>main_cap or su[0]==0: evict_main()
                else: evict_small()
            else:
                if mu[0]==0 or su[0]*100>=cap*10: evict_small()
                else: evict_main()
        if hog:
            main[o]=[sz,0]; mu[0]+=sz
        else:
            if small_limit and sz>=small_cap: continue
            if pre_main and not has_ev[0] and su[0]>=small_cap:
                main[o]=[sz,0]; mu[0]+=sz
            else:
                small[o]=[sz,0]; su[0]+=sz
    return misses
MiB=1<<20
sizes=[128,256,384,512,640,768,896,1024]
ref=[89307, 82387, 77041, 76791, 71300, 70343, 70455, 70355]
import itertools
cfgs={'all':{}, 'noghostbytes':dict(ghost_bytes=False),'novictim':dict(libvictim=False),'nosmalllimit':dict(small_limit=False),'nopremain':dict(pre_main=False),'ours':dict(ghost_bytes=False,libvictim=False,small_limit=False,pre_main=False)}
for name,kw in cfgs.items():
    r=[run(s*MiB,**kw) for s in sizes]
    print(name, r, [round((a-b)/len(reqs)*100,2) for a,b in zip(r,ref)], flush=True)
print('---')
for name,kw in {'np+ghostitems':dict(pre_main=False,ghost_bytes=False),'np+ourvictim':dict(pre_main=False,libvictim=False),'np+nosmalllimit':dict(pre_main=False,small_limit=False),'np+ghostitems+ourvictim':dict(pre_main=False,ghost_bytes=False,libvictim=False)}.items():
    r=[run(s*MiB,**kw) for s in sizes]
    print(name, r, [round((a-b)/len(reqs)*100,2) for a,b in zip(r,ref)], flush=True)
