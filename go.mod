module github.com/leasehold/leasehold

go 1.25.0
