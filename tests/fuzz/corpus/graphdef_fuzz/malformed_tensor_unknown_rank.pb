
*
cConst*
valueB*
dtype0