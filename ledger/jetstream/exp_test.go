package jetstream

import (
	"os"
	"strconv"
)

func init() {
	if v, err := strconv.Atoi(os.Getenv("PC_PIPELINE_MAX")); err == nil {
		pipelineMax = v
	}
}
