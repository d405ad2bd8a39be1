import numpy as np,time,statistics as st,sbmlgpu
from sbmlgpu import api
from sbmlgpu.schedule import Scheduler
S=[]
def mk(devices,**kw):
 s=Scheduler(devices=list(devices),**kw);S.append(s);return s
api.Scheduler=mk
r=np.random.default_rng(5)
def seir(n):return {"beta":np.exp(r.uniform(np.log(.05),np.log(3),n)),"gamma":np.exp(r.uniform(np.log(.02),np.log(2),n))}
C=[("seir_epidemic",200000,160,"dopri5"),("lorenz",1000000,5,"dopri5")]
for m,n,end,meth in C:
 net=sbmlgpu.load(f"sbml_models/{m}.xml");p=seir(n) if m!="lorenz" else {"rho":np.linspace(0,28,n)};ref=None
 for k in (1,2,1,2):
  ts=[]
  for i in range(4):
   S.clear();t=time.perf_counter();o=api.run(net,"ode",times=np.linspace(0,end,11),parameters=p,options={"method":meth,"threads_per_gpu":k},device=[0],progress=False);ts.append(time.perf_counter()-t)
  d=np.asarray(o.data);same=True if ref is None else np.array_equal(d,ref,equal_nan=True);ref=d if ref is None else ref
  b=[x.size for x in S[-1].last_batches];md=o.metadata
  print(f"{m} n={n} {meth} k={k}: median {st.median(ts[1:]):.4f} min {min(ts[1:]):.4f} batches {len(b)} max {max(b)} {md['bundling']} second {md['second_pass_members']} same {same}",flush=True)
