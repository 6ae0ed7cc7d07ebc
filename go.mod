module github.com/leasehold/leasehold

go 1.25.0

require pgregory.net/rapid v1.3.0 // indirect
