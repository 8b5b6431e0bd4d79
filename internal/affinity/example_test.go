package affinity_test

import (
	"fmt"

	"github.com/vnic/vnic/internal/affinity"
)

func ExamplePin() {
	unpin, err := affinity.Pin(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer unpin() // the thread's previous CPU mask comes back before it unlocks
	fmt.Println("running on CPU 0")
	// Output: running on CPU 0
}
