module github.com/mongopool/mongopool

go 1.25
