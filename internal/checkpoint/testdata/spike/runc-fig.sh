#!/bin/bash
# runc-fig.sh go|node RUNS : runc checkpoint/restore figures (stdout/stderr through a pipe, as runc needs)
kind=$1; runs=${2:-5}; B=/tmp/cx/oci/$kind; C=/tmp/cx/c/oci-$kind
if [ ! -d $B ]; then
  mkdir -p $B/rootfs && cd $B && runc spec && python3 - $kind <<'PY'
import json,sys
kind=sys.argv[1]
c=json.load(open('config.json'))
c['process']['terminal']=False
c['process']['args']=['/.helmr/agent'] if kind=='go' else ['node','/.helmr/agent.mjs']
c['process']['cwd']='/workspace'
c['root']={'path':'rootfs','readonly':True}
m=[x for x in c['mounts'] if x['destination'] in ('/proc','/dev','/dev/pts','/dev/shm','/dev/mqueue','/sys')]
agent=('/tmp/cx/counter','/.helmr/agent') if kind=='go' else ('/tmp/cx/counter.mjs','/.helmr/agent.mjs')
for src,dst,ro in [('/usr','/usr',1),('/tmp/cx/etc','/etc',1),('/tmp/cx/c/oci-%s/workspace'%kind,'/workspace',0),('/tmp/cx/c/oci-%s/tmp'%kind,'/tmp',0),(agent[0],agent[1],1)]:
    m.append({'destination':dst,'type':'bind','source':src,'options':['rbind','ro' if ro else 'rw','nosuid','nodev']})
c['mounts']=m
c['linux']['namespaces']=[{'type':t} for t in ('pid','ipc','uts','mount','network','cgroup')]
json.dump(c,open('config.json','w'),indent=1)
PY
  cd rootfs && mkdir -p usr etc workspace tmp proc dev sys .helmr && touch .helmr/agent .helmr/agent.mjs && ln -sf usr/bin bin && ln -sf usr/lib lib && ln -sf usr/lib64 lib64 && ln -sf usr/sbin sbin
fi
mkdir -p $C/workspace $C/tmp; cd $B
id=fig-$kind
for i in $(seq $runs); do
  runc kill $id KILL 2>/dev/null; sleep 0.2; runc delete -f $id 2>/dev/null
  rm -rf /tmp/cx/img/runc-$kind; : > $C/process.log
  (setsid runc run -d $id </dev/null 2>&1 | cat >> $C/process.log &)
  for j in $(seq 300); do [ "$(grep -c n= $C/process.log)" -ge 5 ] && break; sleep 0.02; done
  pid=$(runc state $id | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
  rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  s=$(date +%s%N); runc checkpoint --image-path /tmp/cx/img/runc-$kind $id || { echo dump failed; exit 1; }; d=$(( ($(date +%s%N)-s)/1000000 ))
  last=$(tail -1 $C/process.log)
  size=$(du -sk /tmp/cx/img/runc-$kind | cut -f1)
  ( s=$(date +%s%N); runc restore -d --image-path /tmp/cx/img/runc-$kind $id </dev/null; echo $(( ($(date +%s%N)-s)/1000000 )) > /tmp/cx/rt ) 2>&1 | cat >> $C/process.log &
  for j in $(seq 300); do [ -s /tmp/cx/rt ] && break; sleep 0.01; done; sleep 0.3
  r=$(cat /tmp/cx/rt); rm -f /tmp/cx/rt
  echo "runc $kind run=$i rss_kb=$rss dump_ms=$d restore_ms=$r image_kb=$size before='$last' after='$(tail -1 $C/process.log)'"
done
runc kill $id KILL 2>/dev/null; sleep 0.2; runc delete -f $id 2>/dev/null
