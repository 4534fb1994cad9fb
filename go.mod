module github.com/mlxcel/mlxcel

go 1.26.8
