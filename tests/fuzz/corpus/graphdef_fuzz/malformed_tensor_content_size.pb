
5
cConst*
valueB"abcdefg*
dtype0