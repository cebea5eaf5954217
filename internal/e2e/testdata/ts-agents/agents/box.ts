import { template, image } from "@helmr/sdk"

// The Computer of every test Agent: the host's root filesystem (node from /usr).
export const box = template({
  id: "box",
  image: image("box").fromHost(),
  resources: { cpu: 1, memory: "512MiB" },
})
