package fleetpage_test

import (
	"bytes"
	"flag"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the page's icons (assets/icon-*.png) from their drawing")

// The icon, on a 512 unit square: the fleet as three rows, the first ending
// in the waiting colour's dot (something needs you), on the page's running
// blue. Everything drawn lies within the maskable safe zone (a circle of
// radius 0.4 around the centre), so a launcher's mask never cuts it.
var (
	iconBG   = color.NRGBA{0x1a, 0x5f, 0xb4, 0xff}
	iconRow  = color.NRGBA{0xff, 0xff, 0xff, 0xff}
	iconDot  = color.NRGBA{0xf2, 0xb4, 0x5a, 0xff}
	iconRows = []struct{ x0, x1, y float64 }{{136, 300, 186}, {136, 376, 256}, {136, 336, 326}}
	iconDotC = [3]float64{356, 186, 34} // x, y, radius
)

const (
	iconRowHalf   = 20 // half a row's height: its ends are round
	iconSupersamp = 4  // samples per pixel side
	iconUnits     = 512.0
)

// drawIcon renders the icon at size pixels, each pixel the average of
// iconSupersamp² samples, so its edges are smooth.
func drawIcon(size int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	scale := iconUnits / float64(size)
	for py := range size {
		for px := range size {
			var r, g, b float64
			for sy := range iconSupersamp {
				for sx := range iconSupersamp {
					x := (float64(px) + (float64(sx)+0.5)/iconSupersamp) * scale
					y := (float64(py) + (float64(sy)+0.5)/iconSupersamp) * scale
					c := iconAt(x, y)
					r, g, b = r+float64(c.R), g+float64(c.G), b+float64(c.B)
				}
			}
			n := float64(iconSupersamp * iconSupersamp)
			img.SetNRGBA(px, py, color.NRGBA{uint8(math.Round(r / n)), uint8(math.Round(g / n)), uint8(math.Round(b / n)), 0xff})
		}
	}
	return img
}

// iconAt is the icon's colour at a point in units.
func iconAt(x, y float64) color.NRGBA {
	if math.Hypot(x-iconDotC[0], y-iconDotC[1]) <= iconDotC[2] {
		return iconDot
	}
	for _, row := range iconRows {
		// A capsule: the distance to the segment between the ends' centres.
		cx := math.Max(row.x0+iconRowHalf, math.Min(x, row.x1-iconRowHalf))
		if math.Hypot(x-cx, y-row.y) <= iconRowHalf {
			return iconRow
		}
	}
	return iconBG
}

// The committed icons are the drawing's, pixel for pixel (-update rewrites
// them), and the drawing keeps to the maskable safe zone.
func TestIcons(t *testing.T) {
	t.Parallel()
	for _, row := range iconRows {
		for _, p := range [][2]float64{{row.x0, row.y - iconRowHalf}, {row.x1, row.y + iconRowHalf}, {row.x0, row.y + iconRowHalf}, {row.x1, row.y - iconRowHalf}} {
			if d := math.Hypot(p[0]-iconUnits/2, p[1]-iconUnits/2); d > 0.4*iconUnits {
				t.Errorf("row corner %v lies %.0f units from the centre, outside the safe zone", p, d)
			}
		}
	}
	if d := math.Hypot(iconDotC[0]-iconUnits/2, iconDotC[1]-iconUnits/2) + iconDotC[2]; d > 0.4*iconUnits {
		t.Errorf("the dot reaches %.0f units from the centre, outside the safe zone", d)
	}
	for _, size := range []int{192, 512} {
		path := filepath.Join("assets", "icon-"+strconv.Itoa(size)+".png")
		want := drawIcon(size)
		if *update {
			var buf bytes.Buffer
			if err := png.Encode(&buf, want); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got.Bounds() != want.Bounds() {
			t.Fatalf("%s is %v, want %v", path, got.Bounds(), want.Bounds())
		}
		for y := range size {
			for x := range size {
				if g, w := color.NRGBAModel.Convert(got.At(x, y)), want.NRGBAAt(x, y); g != w {
					t.Fatalf("%s differs from the drawing at (%d,%d): %v, want %v (go test ./fleetpage/ -run TestIcons -update)", path, x, y, g, w)
				}
			}
		}
	}
}
