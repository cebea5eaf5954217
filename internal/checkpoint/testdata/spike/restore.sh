#!/bin/bash
# restore.sh DIR [extra criu args]
dir=$(realpath $1); shift
R=$dir.root; umount -l $R 2>/dev/null; mkdir -p $R && mount -t tmpfs -o mode=755 tmpfs $R
while read y m p l; do case $y in d) mkdir -p -m $m $R/$p;; f) install -m $m /dev/null $R/$p;; l) ln -s $l $R/$p;; esac; done < $dir/skeleton
mount -o remount,ro $R
inh=(); n=20
declare -A seen
while read fd key path; do
  [ -n "${seen[$key]}" ] && continue; seen[$key]=1
  if [ "$path" = /dev/null ]; then eval "exec $n</dev/null"; else eval "exec $n>>'$path'"; fi
  inh+=(--inherit-fd "fd[$n]:$key"); n=$((n+1))
done < $dir/externals
s=$(date +%s.%N)
criu restore -d -D $dir -o restore.log -v4 --root $R --ext-mount-map auto --enable-external-sharing --enable-external-masters "${inh[@]}" "$@" --pidfile $dir/restored.pid
rc=$?
e=$(date +%s.%N)
umount -l $R
echo "restore rc=$rc $(echo "$e - $s" | bc) s pid=$(cat $dir/restored.pid)"
