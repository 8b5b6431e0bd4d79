module github.com/vnic/vnic

go 1.26
