package fingerprint

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCompute measures one Compute, as the ledger runs it on every
// Begin, for a typical small call and for arguments near MaxArgumentsBytes.
func BenchmarkCompute(b *testing.B) {
	small := `{"version":"1.4.0","spec":{"image":"registry.example/web:1.4.0","env":{"LOG":"info"}},` +
		`"comment":"friday deploy","token":"hunter22-hunter22","tags":["a","b","c"],"budget":12.5}`
	var big strings.Builder
	big.WriteString(`{"items":[`)
	for i := 0; big.Len() < MaxArgumentsBytes-200; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"id":%d,"name":"item %d","price":%d.25,"ok":true}`, i, i, i)
	}
	big.WriteString(`],"token":"hunter22"}`)
	for _, bc := range []struct{ name, args string }{{"small", small}, {"64KiB", big.String()}} {
		a := baseAction(bc.args)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.args)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compute(testKey, deployRules, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
