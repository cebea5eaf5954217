#!/bin/bash
# bwrap-fig.sh go|node RUNS : bwrap (--as-pid-1 --new-session) + criu CLI figures, same programs as runc-fig.sh
kind=$1; runs=${2:-5}
for i in $(seq $runs); do
  pid=$(./sbxbin f-$kind $kind --as-pid-1 --new-session); C=/tmp/cx/c/f-$kind
  for j in $(seq 300); do [ "$(grep -c n= $C/process.log)" -ge 5 ] && break; sleep 0.02; done
  rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  d=$(./dump.sh $pid /tmp/cx/img/f-$kind --network-lock skip --file-locks --tcp-close 2>&1 | grep -o 'dump rc=.*')
  last=$(tail -1 $C/process.log); size=$(du -sk /tmp/cx/img/f-$kind | cut -f1)
  r=$(./restore.sh /tmp/cx/img/f-$kind --file-locks --tcp-close 2>&1 | grep -o 'restore rc=.*')
  sleep 0.3
  echo "bwrap-criu $kind run=$i rss_kb=$rss $d | $r image_kb=$size before='$last' after='$(tail -1 $C/process.log)'"
  kill -9 $(cat /tmp/cx/img/f-$kind/restored.pid)
done
