
5
cConst*
valueBýÿÿÿÿÿÿÿÿ*
dtype0