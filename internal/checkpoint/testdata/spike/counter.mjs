import fs from 'node:fs';
const state = [];
for (let i = 0; i < 200000; i++) state.push({ i, s: 'x'.repeat(16) + i });
let n = 0;
setInterval(() => {
  n++;
  process.stdout.write(`n=${n} len=${state.length} pid=${process.pid}\n`);
  fs.writeFileSync('/workspace/count', String(n));
}, 100);
