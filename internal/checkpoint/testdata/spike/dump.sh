#!/bin/bash
# dump.sh PID DIR [extra criu args]: dumps a --as-pid-1 bwrap sandbox tree, host files marked external
pid=$1; dir=$2; shift 2
rm -rf $dir; mkdir -p $dir
ext=()
mnts=$(awk '{print $1}' /proc/$pid/mountinfo)
for n in $(ls /proc/$pid/fd); do
  f=/proc/$pid/fd/$n
  t=$(stat -L -c %F $f)
  case "$t" in "regular file"|"regular empty file"|"character special file") ;; *) continue;; esac
  mnt=$(awk '/mnt_id/{print $2}' /proc/$pid/fdinfo/$n)
  echo "$mnts" | grep -qx $mnt && continue
  ino=$(stat -L -c %i $f)
  ext+=(--external "file[$(printf %x $mnt):$(printf %x $ino)]")
  echo "$n file[$(printf %x $mnt):$(printf %x $ino)] $(readlink $f)" >> $dir/externals
done
( cd /proc/$pid/root && find . -xdev -mindepth 1 -printf '%y %m %p %l\n' ) > $dir/skeleton
s=$(date +%s.%N)
criu dump -t $pid -D $dir -o dump.log -v4 --ext-mount-map auto --enable-external-sharing --enable-external-masters "${ext[@]}" "$@"
rc=$?
e=$(date +%s.%N)
echo "dump rc=$rc $(echo "$e - $s" | bc) s"
