//go:build linux

package local_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
)

// BenchmarkStart times a process's start and end in a Computer (/bin/true),
// without and with a disk limit (which mounts the Computer's image on each
// start where the host gives images).
func BenchmarkStart(b *testing.B) {
	p, err := local.New(local.Options{Dir: b.TempDir(), CgroupName: "helmr-bench"})
	if err != nil {
		b.Skipf("no sandbox here: %v", err)
	}
	b.Cleanup(p.Cleanup)
	for _, disk := range []string{"", "64MiB"} {
		b.Run("disk="+disk, func(b *testing.B) {
			s := computer.Spec{ID: "bench-start" + disk, Image: computer.Image{Host: true}, Resources: helmrtype.ResourcesManifest{Disk: disk}}
			if err := p.Create(context.Background(), s); err != nil {
				b.Fatal(err)
			}
			defer p.Delete(context.Background(), s.ID)
			for b.Loop() {
				pr, err := p.Start(context.Background(), s, computer.ProcessSpec{Argv: []string{"/bin/true"}})
				if err != nil {
					b.Fatal(err)
				}
				if code, err := pr.Wait(); code != 0 || err != nil {
					b.Fatal(code, err)
				}
			}
		})
	}
}

// BenchmarkCreate times making and deleting a Computer, without and with a
// disk limit (which makes an image).
func BenchmarkCreate(b *testing.B) {
	p, err := local.New(local.Options{Dir: b.TempDir(), CgroupName: "helmr-bench"})
	if err != nil {
		b.Skipf("no sandbox here: %v", err)
	}
	b.Cleanup(p.Cleanup)
	for _, disk := range []string{"", "64MiB", "10GiB"} {
		b.Run("disk="+disk, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				s := computer.Spec{ID: fmt.Sprintf("bench-create-%d", i), Image: computer.Image{Host: true}, Resources: helmrtype.ResourcesManifest{Disk: disk}}
				if err := p.Create(context.Background(), s); err != nil {
					b.Fatal(err)
				}
				if err := p.Delete(context.Background(), s.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
