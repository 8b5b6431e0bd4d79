package xsk_test

import (
	"os"
	"testing"

	"github.com/vnic/vnic/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.MainWithLeakCheck(m)) }
